"""Example table: for every built-in value pattern, texts it must catch (with the part that must
vanish) and texts it must leave alone; for the key-name rule, keys that are and are not
sensitive. A test fails when a built-in pattern has no entry here or an empty list."""

from __future__ import annotations

A36 = "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
A40 = "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBaZyX"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# name -> (positives: [(text, part that must vanish)], negatives: [text])
VALUE_EXAMPLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "private_key": (
        [
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----",
                "MIIEpAIBAAKCAQEA7x",
            ),
            (
                "key: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA",
                "b3BlbnNzaC1rZXktdjEA",
            ),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBFx9\n-----END PGP PRIVATE KEY BLOCK-----",
                "lQOYBFx9",
            ),
            (
                "PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAAgQCx\nPrivate-MAC: 8a9b",
                "AAAAgQCx",
            ),
        ],
        [
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----",
            "store the private key in the vault",
        ],
    ),
    "jwt": (
        [
            (JWT, JWT),
            (f"header was {JWT}, expired", JWT),
            (
                "alg none: eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
                "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
            ),
        ],
        ["eyJ is how base64 JSON starts", "eyJhbGciOiJIUzI1NiJ9", "version 1.2.3"],
    ),
    "bearer": (
        [
            ("Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234"),
            ("BEARER 4f9c2a7d1e8b3c6a5f0e", "4f9c2a7d1e8b3c6a5f0e"),
            (f"bearer {JWT}", JWT),
        ],
        [
            "Bearer authentication is described in RFC 6750",
            "the bearer of this letter",
            "Bearer abcdefghijklmnopq",
        ],
    ),
    "basic_auth": (
        [("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==")],
        ["Basic instructions follow", "basic aGVsbG8gd29ybGQ=", "a basic setup"],
    ),
    "aws_access_key": (
        [
            ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
            ("key ASIAY34FZKBOKMUTVV7A here", "ASIAY34FZKBOKMUTVV7A"),
        ],
        ["AKIAIOSFODNN7EXAMPLEX", "AKIA1234", "MAKIAIOSFODNN7EXAMPLE"],
    ),
    "github_token": (
        [
            (f"ghp_{A36}", f"ghp_{A36}"),
            (f"token gho_{A36} used", f"gho_{A36}"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            ),
        ],
        ["ghp_short", "the ghost_of_christmas", f"xghp_{A36}"],
    ),
    "gitlab_token": (
        [("glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789")],
        ["glpat-short", "glpat is GitLab's prefix"],
    ),
    "slack_token": (
        [
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            ),
            (
                "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXX",
                "T00000000/B00000000/XXXXXXXXXXXXXXXX",
            ),
        ],
        ["xoxo kisses", "see https://hooks.slack.com/ for docs", "xoxb-short"],
    ),
    "stripe_key": (
        [
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
            ("rk_test_51H8abcdefghijklmnopqrst", "rk_test_51H8abcdefghijklmnopqrst"),
            ("whsec_abcdefghijklmnopqrstuvwxyz012345", "whsec_abcdefghijklmnopqrstuvwxyz012345"),
        ],
        ["sk_live_short", "disk_test_abcdefghijklmnopqrstu", "pk_live_4eC39HqLyjWDarjtT1zdp7dc"],
    ),
    "anthropic_key": (
        [(f"sk-ant-api03-{A40}", f"sk-ant-api03-{A40}")],
        ["sk-ant-short", "task-ant-api03-with-a-long-kebab-case-name"],
    ),
    "langfuse_key": (
        [
            (
                "LANGFUSE_SECRET sk-lf-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
                "sk-lf-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
            )
        ],
        ["sk-lf-x", "pk-lf-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"],
    ),
    "openai_key": (
        [
            (f"sk-proj-{A40}", f"sk-proj-{A40}"),
            (f"use sk-{A40}T3BlbkFJ{A40[:20]} now", f"sk-{A40}T3BlbkFJ{A40[:20]}"),
            (f"sk-svcacct-{A40}", A40),
        ],
        [
            "sk-learn is a library",
            "risk-assessment-for-the-new-product-2024",
            "sk-abcdefghijklmnopqrstuvwxyz",
        ],
    ),
    "google_api_key": (
        [
            (
                "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
                "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
            )
        ],
        ["AIzaShort", "AIza is the Google prefix"],
    ),
    "huggingface_token": (
        [("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567")],
        ["hf_hub_download", "hf_AbCdEfGhIjKlMnOpQrStUvWxYzabcdefgh"],
    ),
    "sendgrid_key": (
        [
            (
                "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",
                "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",
            )
        ],
        ["SG.example.com", "SG. and then some"],
    ),
    "pypi_token": (
        [(f"pypi-AgEIcHlwaS5vcmc{A40}{A40}", f"pypi-AgEIcHlwaS5vcmc{A40}{A40}")],
        ["pypi-AgE", "pypi-simple index"],
    ),
    "npm_token": (
        [(f"npm_{A36}", f"npm_{A36}")],
        ["npm_config_cache", "run npm_install"],
    ),
    "connection_string": (
        [
            ("postgresql://app:hunter2pw@db.internal:5432/app", "hunter2pw"),
            ("redis://:s3cretpass@cache:6379/0", "s3cretpass"),
            ("fetch https://user:tok3nvalue@example.com/path failed", "tok3nvalue"),
        ],
        [
            "https://example.com:8443/path",
            "git@github.com:org/repo.git",
            "https://user@example.com/",
            "mailto:bob@example.com",
        ],
    ),
    "secret_assignment": (
        [
            ("password=hunter2!", "hunter2!"),
            ("login failed: api_key: AbCdEf123456", "AbCdEf123456"),
            ('export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG"', "wJalrXUtnFEMI/K7MDENG"),
            ("GET /cb?token=abc123def&x=1", "abc123def"),
            ("Authorization: Token abcdef123456", "abcdef123456"),
            ('{"password": "hunter2"', "hunter2"),
        ],
        [
            "max_tokens=512",
            "tokens: 1234",
            "password reset link sent",
            "author=ada",
            "keyboard: us",
            "password_required: true",
            "the key: value pairs",
        ],
    ),
    "credit_card": (
        [
            ("4111 1111 1111 1111", "4111 1111 1111 1111"),
            ("card 5555-5555-5555-4444 declined", "5555-5555-5555-4444"),
            ("378282246310005", "378282246310005"),
            ("6011111111111117", "6011111111111117"),
        ],
        [
            "4111 1111 1111 1112",
            "1700000000000000000",
            "order 12345678901234",
            "v1.4111111111111111",
            "sha a94111111111111111bc07",
        ],
    ),
    "email": (
        [("contact bob.smith+tag@example.co.uk today", "bob.smith+tag@example.co.uk")],
        ["@mention in slack", "user@localhost", "git@github"],
    ),
    "phone": (
        [
            ("call +1 415 555 0100 now", "415 555 0100"),
            ("(415) 555-0100", "555-0100"),
            ("415-555-0100", "415-555-0100"),
            ("+442071838750", "442071838750"),
        ],
        ["2024-01-15", "version 1.2.3.4", "192.168.100.200", "order 1700000000"],
    ),
}

SENSITIVE_KEYS = [
    "password",
    "db_password",
    "dbPassword",
    "passwd",
    "PWD",
    "passphrase",
    "apiKey",
    "X-Api-Key",
    "access_token",
    "refreshToken",
    "id_token",
    "csrf_token",
    "Authorization",
    "auth",
    "cookie",
    "Set-Cookie",
    "client_secret",
    "AWS_SECRET_ACCESS_KEY",
    "credentials",
    "private_key",
    "signingKey",
    "ssn",
    "cvv",
    "pin",
    "card_number",
    "creditCard",
    "otp",
]

INNOCENT_KEYS = [
    "author",
    "authors",
    "author_id",
    "tokenizer",
    "max_tokens",
    "input_tokens",
    "token_count",
    "tokens_used",
    "session_id",
    "sessionId",
    "key",
    "keys",
    "monkey",
    "primary_key",
    "public_key",
    "passage",
    "compass",
    "bypass_cache",
    "spin",
    "pinned",
    "oauth_provider",
    "description",
]
