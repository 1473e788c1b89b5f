"""The pure domain: schedules and time, policies, models, state transitions, errors.

Nothing in this package reads the clock, the environment or talks to AWS: time is a parameter and
every datetime is timezone-aware.
"""
