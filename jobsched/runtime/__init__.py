"""What a running process needs around the services: settings from the environment, the resource names
and specs (shared with ``infra/``), logging and metrics, the wall clock, and the wiring that builds each
service from settings."""
