"""GPT-2's byte-level alphabet (tokenizers' ByteLevel pre-tokenizer and decoder): each byte's printable stand-in."""

from __future__ import annotations


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-ins for bytes (bytes_to_unicode), inverted: char -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars
