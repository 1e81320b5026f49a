"""ReFrame's glue, beside reframe_settings.py: the site configuration built
from the system files in systems/ (settings.py: systems, partitions,
environments, the perflog format and handlers, the modes), and the jsrun
launcher and LSF node scheduler ReFrame lacks (launchers.py). The only
package besides checks/ that imports ReFrame (this file does not: the
runners read what they tell the settings from here)."""

#: Set in each task of the LSF job over a partition's nodes (runner/partition.py): its jobs run where it is.
ON_NODE_VARIABLE = "GPU_MEMPATHS_ON_NODE"
#: How many nodes a partition's night runs on at once (runner/partition.py): each may run its partition's
#: max_jobs, so that the night takes about one node's time.
NODES_VARIABLE = "GPU_MEMPATHS_NODES_AT_ONCE"
