"""The operator console's sign-in on AWS: an optional Cognito user pool (``-c console_user_pool=true``).

The console itself is static and served by the api function at ``/ui`` (public routes, infra/api.py).
A browser cannot sign SigV4 requests, so with the user pool the API runs in JWT mode: API Gateway's
user-pool authorizer accepts the pool's ID tokens for the console's app client, and the api function
reads the tenant from the token's ``custom:tenant`` claim. Administrators create the users (no self
sign-up) and set each one's ``custom:tenant``; the app client may read that attribute but not write it,
so a user cannot move to another tenant. The console signs in with ``USER_PASSWORD_AUTH`` (a direct
``InitiateAuth`` call to Cognito from the browser); no hosted UI, no OAuth redirect.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from infra.config import StackConfig
from infra.nag import acknowledge

#: The Cognito attribute that names a user's tenant, and the ID token claim it becomes.
TENANT_ATTRIBUTE = "tenant"
TENANT_CLAIM = f"custom:{TENANT_ATTRIBUTE}"


class ConsoleUserPool(Construct):
    """``user_pool`` and ``client`` (the console's app client, no secret)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(username=True, email=True),
            custom_attributes={
                TENANT_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=128, mutable=True)
            },
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
                temp_password_validity=cdk.Duration.days(3),
            ),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            feature_plan=cognito.FeaturePlan.ESSENTIALS,
            removal_policy=cdk.RemovalPolicy.DESTROY
            if config.removal_policy_destroy
            else cdk.RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.user_pool,
            "AwsSolutions-COG2",
            "MFA is optional, not required: the console's sign-in form answers no MFA challenge "
            "(docs/deploy.md, 'The console'); users may still enrol a TOTP factor.",
        )
        plus = (
            "threat protection (the Plus feature plan) is a priced option the operator may enable on the "
            "pool; the pool has no self sign-up, and administrators create every user."
        )
        acknowledge(self.user_pool, "AwsSolutions-COG3", plus)
        acknowledge(self.user_pool, "AwsSolutions-COG8", plus)
        self.client = self.user_pool.add_client(
            "Console",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_password=True, user_srp=True),
            disable_o_auth=True,
            prevent_user_existence_errors=True,
            id_token_validity=cdk.Duration.hours(1),
            access_token_validity=cdk.Duration.hours(1),
            refresh_token_validity=cdk.Duration.days(1),
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True)
            .with_custom_attributes(TENANT_ATTRIBUTE),
            write_attributes=cognito.ClientAttributes().with_standard_attributes(email=True),
        )
