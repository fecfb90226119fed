"""Collection rules for the dataset tests."""

# A plugin module that registers a callback when `composer --import` imports it (in the kill-and-resume
# test's subprocesses); importing it here, as doctest collection would, would register it in this process too.
collect_ignore = ["kill_resume_hooks.py"]
