"""ReFrame configuration of the suite, built from the system files in systems/.

    reframe -C reframe_settings.py -c checks -r [--system summit]

Without --system, ReFrame picks the first system whose hostnames match this
machine; 'local' matches any, and describes the node it runs on (GPUs, host
link, NVLink, NUMA, addressing mode) at run time.
"""

import sys
from pathlib import Path

# The system data and the checks' shared code live beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rfmconfig import reframe_fixes  # noqa: E402
from rfmconfig.settings import site_configuration  # noqa: E402

# Before the checks load: two of ReFrame's costs mended, its output the same (rfmconfig/reframe_fixes.py).
reframe_fixes.install()
site_configuration = site_configuration()
