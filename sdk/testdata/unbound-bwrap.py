#!/usr/bin/python3
"""A stand-in for bwrap, shared by both SDKs' sandbox tests: its sandbox
process (here: the command itself, in a session of its own) is not bound to
bwrap's life, as bwrap's first sandbox process is not until the end of its
setup; it reports that process on --info-fd as bwrap does."""
import os
import sys

args = sys.argv[1:]
argv = args[args.index("--") + 1:]
if argv == ["true"]:
    sys.exit(0)  # the SDKs' availability probe
fd = int(args[args.index("--info-fd") + 1]) if "--info-fd" in args else -1
pid = os.fork()
if pid == 0:
    os.setsid()
    if fd >= 0:
        os.close(fd)  # as bwrap's sandbox does
    os.execvp(argv[0], argv)
if fd >= 0:
    os.write(fd, b'{\n    "child-pid": %d\n}\n' % pid)
    os.close(fd)
os.waitpid(pid, 0)
