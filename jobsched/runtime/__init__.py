"""The ground floor of a running process: settings from the environment, the resource names and specs
(shared with ``infra/``), logging and metrics, and the wall clock. What builds the services from them
is the composition room, :mod:`jobsched.compose`."""
