"""ReFrame's glue, beside reframe_settings.py: the site configuration built
from the system files in systems/ (settings.py: systems, partitions,
environments, the perflog format and handlers, the modes), and the jsrun
launcher and LSF node scheduler ReFrame lacks (launchers.py). The only
package besides checks/ that imports ReFrame."""
