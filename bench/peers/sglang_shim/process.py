"""`sglang.srt.utils`' process helpers, as the tests use them: stop a server popen_launch_server started."""

from __future__ import annotations

import os
import signal

import psutil

STOP_S = 60.0  # the stack's own graceful stop is 30 s at most


def kill_process_tree(parent_pid: int | None = None, include_parent: bool = True, skip_pid: int | None = None):
    """SIGTERM the process (the stack stops its children itself), then kill whatever of its tree is left."""
    parent_pid = os.getpid() if parent_pid is None else parent_pid
    try:
        parent = psutil.Process(parent_pid)
    except psutil.NoSuchProcess:
        return
    tree = [p for p in parent.children(recursive=True) if p.pid != skip_pid]
    if include_parent and parent_pid != os.getpid():
        tree.insert(0, parent)
        parent.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=STOP_S if include_parent else 0)
    for process in alive:
        process.kill()
    psutil.wait_procs(alive, timeout=10)


def kill_child_process(pid: int | None = None, include_self: bool = False, skip_pid: int | None = None):
    """The older name: with a pid, that server's whole tree."""
    if pid is None:
        kill_process_tree(os.getpid(), include_parent=include_self, skip_pid=skip_pid)
    else:
        kill_process_tree(pid, include_parent=True, skip_pid=skip_pid)
