"""The deploy rehearsal (make deploy-rehearsal): dev-only, never in the Lambda asset."""
