"""A `with` block around what devstack starts: a start that fails half-way stops what it began."""

from __future__ import annotations

from typing import Self


class Started:
    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
