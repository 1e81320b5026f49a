"""The exit statuses of the suite's commands and what each means, said once.

Every command that judges (nightly, rejudge, compare, upgrade, power) exits
with one of these. A usage error, or an error of the suite itself, judged
nothing: UNJUDGED, never the MOVED of a real change, so that no typo in a
crontab reads as a move.
"""

AS_ACCEPTED, FAILED, MOVED, UNJUDGED = 0, 1, 2, 3

MEANING = {AS_ACCEPTED: "as accepted", FAILED: "a check failed", MOVED: "something moved", UNJUDGED: "not judged"}
