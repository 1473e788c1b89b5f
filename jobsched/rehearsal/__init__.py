"""The deploy rehearsal (``make deploy-rehearsal``): the first-deploy checklist of docs/deploy.md with
the real CDK CLI against an emulated account on loopback. Dev-only, like ``bench`` and ``local``: never
in the Lambda asset.

``main`` runs the steps; ``cdk`` the pinned CLI; ``server`` the account (moto in a child process);
``emulator`` and ``placeholders`` the CloudFormation workarounds patched into it; ``checks`` what was
deployed, read back from the APIs; ``scenario`` the quickstart on the deployed stack.
"""
