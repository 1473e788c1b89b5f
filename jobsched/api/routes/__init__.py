"""One router per resource (Powertools ``Router``), each built by a function that takes its services."""
