"""The GPU's clocks and power while a run lasts: `nvidia-smi` sampled every 100 ms, summed up as the mean SM
clock, mean and peak power, the throttle reasons seen, and the energy, so a report can say what the chip ran at
and what an output token cost in joules. Off CUDA, or without nvidia-smi, it measures nothing."""

from __future__ import annotations

import shutil
import subprocess

QUERY = "clocks.sm,power.draw,clocks_throttle_reasons.active"
PERIOD_MS = 100


class PowerSampler:
    def __init__(self, device: str):
        self.on = device.startswith("cuda") and shutil.which("nvidia-smi") is not None
        self.index = device.partition(":")[2] or "0"
        self.process: subprocess.Popen | None = None
        self.samples: list[tuple[float, float, int]] = []  # (SM MHz, W, throttle reasons)

    def __enter__(self) -> PowerSampler:
        if self.on:
            command = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", f"-lms={PERIOD_MS}"]
            self.process = subprocess.Popen(command + ["-i", self.index], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *_) -> None:
        if self.process is None:
            return
        self.process.terminate()
        out, _ = self.process.communicate(timeout=10)
        for line in out.splitlines():
            try:
                clock, watts, reasons = (field.strip() for field in line.split(","))
                self.samples.append((float(clock), float(watts), int(reasons, 16)))
            except ValueError:  # a cut last line, or "[N/A]"
                continue

    def summary(self, seconds: float, output_tokens: int) -> dict | None:
        """The run's figures; None when nothing was sampled."""
        if not self.samples:
            return None
        clocks, watts, reasons = zip(*self.samples, strict=True)
        mean_w = sum(watts) / len(watts)
        seen = 0
        for reason in reasons:
            seen |= reason
        return {
            "sm_clock_mhz_mean": sum(clocks) / len(clocks),
            "sm_clock_mhz_min": min(clocks),
            "power_w_mean": mean_w,
            "power_w_max": max(watts),
            "throttle_reasons": f"{seen:#x}",
            "joules": mean_w * seconds,
            "joules_per_output_token": mean_w * seconds / max(output_tokens, 1),
        }

    @staticmethod
    def describe(figures: dict | None) -> str:
        if figures is None:
            return ""
        return (
            f"GPU             SM clock mean {figures['sm_clock_mhz_mean']:.0f} MHz (min {figures['sm_clock_mhz_min']:.0f}), "
            f"power mean {figures['power_w_mean']:.0f} W (max {figures['power_w_max']:.0f}), throttle reasons "
            f"{figures['throttle_reasons']}, {figures['joules_per_output_token']:.3f} J per output token"
        )
