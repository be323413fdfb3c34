"""build/bin/torchrun: PyTorch's torchrun (torch.distributed.run, every argument passed on), with
what a user at a terminal and a cluster scheduler expect of it.

Signals. torchrun, sent SIGINT (Ctrl-C) or SIGTERM, signals its workers, waits 30 s, kills them,
then prints a traceback and exits 1, which a scheduler reads as a failed job, although titan's
workers finish their step, write a checkpoint and exit 0 on that signal. Here torchrun runs in a
session of its own, so the terminal's Ctrl-C reaches this wrapper only; the wrapper passes SIGINT
and SIGTERM (and SIGHUP, as SIGTERM) on to the workers themselves (torchrun's children), waits for
them as long as they take, and exits with torchrun's status: 0 when every worker saved and exited
0. A second signal is passed on too (titan then stops at once). Before the workers exist
(rendezvous), the signal goes to torchrun.

Failures. A worker that fails has said why (titan prints one `error: ...` line); torchrun then
raises ChildFailedError, which Python prints with the launcher's own traceback and a summary
repeating the worker's line. Here torchrun runs under a bootstrap that catches it and prints one
line per failed rank instead, and the wrapper exits with the worker's exit code (titan's 2 for an
error it reports).

Progress. torchrun gives each worker a file for its output, so no worker sees a terminal and
titan's progress line (steps/s and ETA between logged steps, rank 0) would never show. When this
wrapper's stdout is a terminal it relays torchrun's output line by line and gives rank 0 a named
pipe (TITAN_PROGRESS_FIFO) for the progress line, which it draws below the log lines.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading


def children(pid):
    """The processes whose parent is `pid` (torchrun's workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


class Terminal:
    """Log lines and the one progress line, written to the terminal without interleaving."""

    def __init__(self):
        self.lock = threading.Lock()
        self.progress = ""  # the line drawn below the log, "" when none

    def line(self, stream, text):
        with self.lock:
            if self.progress:
                sys.stdout.write("\r\033[K")
                sys.stdout.flush()
            stream.write(text)
            stream.flush()
            if self.progress:
                sys.stdout.write(self.progress)
                sys.stdout.flush()

    def set_progress(self, text):
        with self.lock:
            if text == self.progress:
                return
            sys.stdout.write("\r\033[K" + text)
            sys.stdout.flush()
            self.progress = text


def relay_lines(pipe, stream, terminal):
    for raw in iter(pipe.readline, b""):
        terminal.line(stream, raw.decode("utf-8", errors="replace"))


def relay_progress(fd, terminal):
    """Messages of rank 0's progress line: one line each, the text to draw ("" clears it)."""
    pending = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        pending += chunk
        *messages, pending = pending.split(b"\n")
        if messages:
            terminal.set_progress(messages[-1].decode("utf-8", errors="replace"))


# torch.distributed.run's main, its ChildFailedError reported in one line per failed rank.
BOOTSTRAP = """
import logging
import sys
# "no error file defined for parent": torchrun's note that it has no file to copy the error to.
logging.getLogger("torch.distributed.elastic.multiprocessing.errors.error_handler").setLevel(
    logging.CRITICAL)
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
try:
    main()
except ChildFailedError as e:
    codes = []
    for rank, failure in sorted(e.failures.items()):
        codes.append(failure.exitcode)
        print(f"[torchrun] {e.name} failed on rank {rank} (local rank {failure.local_rank}) "
              f"with exit code {failure.exitcode}", file=sys.stderr)
    sys.exit(next((c for c in codes if c > 0), 1))
"""


def main(argv):
    env = dict(os.environ)
    terminal = Terminal() if sys.stdout.isatty() else None
    folder = None
    if terminal is not None:
        folder = tempfile.mkdtemp(prefix="titan-torchrun-")
        fifo = os.path.join(folder, "progress")
        os.mkfifo(fifo)
        # Held open for reading and writing: opening never blocks, reading never ends.
        progress_fd = os.open(fifo, os.O_RDWR)
        env["TITAN_PROGRESS_FIFO"] = fifo
        env["PYTHONUNBUFFERED"] = "1"  # torchrun's own lines reach the relay as they come
    pipe = subprocess.PIPE if terminal is not None else None
    torchrun = subprocess.Popen([sys.executable, "-c", BOOTSTRAP, *argv], env=env,
                                start_new_session=True, stdout=pipe, stderr=pipe)

    def pass_on(signum, _frame):
        sent = signal.SIGTERM if signum == signal.SIGHUP else signum
        workers = children(torchrun.pid)
        for pid in workers or [torchrun.pid]:
            try:
                os.kill(pid, sent)
            except ProcessLookupError:
                pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, pass_on)
    relays = []
    if terminal is not None:
        relays = [threading.Thread(target=relay_lines, args=(torchrun.stdout, sys.stdout, terminal)),
                  threading.Thread(target=relay_lines, args=(torchrun.stderr, sys.stderr, terminal))]
        for thread in relays:
            thread.start()
        threading.Thread(target=relay_progress, args=(progress_fd, terminal), daemon=True).start()
    while True:
        try:
            code = torchrun.wait()
            break
        except InterruptedError:
            continue
    for thread in relays:
        thread.join()
    if terminal is not None:
        terminal.set_progress("")
        os.close(progress_fd)
        os.unlink(fifo)
        os.rmdir(folder)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
