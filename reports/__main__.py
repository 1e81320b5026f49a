import signal
import sys

from .cli import main

if hasattr(signal, "SIGPIPE"):  # `python -m reports compare ... | head` ends quietly
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
sys.exit(main())
