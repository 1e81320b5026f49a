"""What drives ReFrame for a verdict and writes results: the nightly (with
its reruns), an acceptance, an upgrade, the run's plan, and the judge's own
test bench and power (which replay committed perflogs through the nightly's
code). Results go under results/ (experiments/roots.py)."""
