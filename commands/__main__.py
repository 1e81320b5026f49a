import signal
import sys

from commands.cli import main

if hasattr(signal, "SIGPIPE"):  # `python -m commands compare ... | head` ends quietly
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
sys.exit(main())
