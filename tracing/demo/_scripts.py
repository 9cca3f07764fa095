"""The demo's three scripted sessions (English, French, Japanese) and their session ids."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from tracing.demo._sim import DEFAULT_SEED, DEFAULT_SESSIONS, Call, SessionPlan, Sim

# --------------------------------------------------------------------------------------------
# the scripted sessions


def _oauth(sim: Sim, rng: random.Random) -> SessionPlan:
    """English: fix a failing test; parallel siblings, a duplicate pair, a failure, a
    background test run, a reviewer subagent, an issue with a business ``intent``."""
    handlers = rng.randint(6, 15)
    module = rng.choice(["src/auth/callback.py", "src/auth/oauth_router.py"])
    settings = rng.choice(["config/settings.py", "src/settings/base.py"])
    failing = rng.choice(
        ["test_callback_rejects_foreign_redirect", "test_callback_keeps_state_param"]
    )
    with sim.turn(1):
        with sim.step("Exploring the auth flow"):
            sim.parallel(
                Call(
                    "search_code",
                    "Searching for the OAuth callback handler",
                    {"query": "def oauth_callback", "path": "src/"},
                    sim.secs(0.3, 0.9),
                    {"matches": handlers, "files": [module]},
                    outcome=f"Found {handlers} OAuth handlers",
                ),
                Call(
                    "search_code",
                    "Searching for where redirect URIs are validated",
                    {"query": "redirect_uri", "path": "src/"},
                    sim.secs(0.4, 1.2),
                    {"matches": 3},
                    patch=("Searching for", "Found"),
                ),
                Call(
                    "read_file",
                    "Reading the failing test",
                    {"path": "tests/auth/test_callback.py"},
                    sim.secs(0.05, 0.2),
                    {"lines": 212},
                    outcome="Read the failing test (212 lines)",
                ),
            )
        with sim.step():  # the model asks for the same file twice in one step
            same = "Reading the OAuth settings"
            sim.parallel(
                Call("read_file", same, {"path": settings}, sim.secs(0.05, 0.2), {"lines": 88}),
                Call("read_file", same, {"path": settings}, sim.secs(0.05, 0.2), {"lines": 88}),
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Running the auth tests",
                    {"target": "tests/auth", "flags": "-x -q"},
                    sim.secs(4, 9),
                    {"passed": 41, "failed": 1},
                    error=f"1 failed: tests/auth/test_callback.py::{failing}",
                )
            )
    with sim.turn(2):
        with sim.step("Fixing the redirect check"):
            sim.call(
                Call(
                    "edit_file",
                    "Tightening the redirect URI comparison",
                    {"path": module, "old": "startswith(allowed)", "new": "== allowed"},
                    sim.secs(0.05, 0.15),
                    {"ok": True},
                    outcome=f"Tightened the redirect URI comparison in {module}",
                )
            )
        with sim.step():
            suite = Call(
                "run_tests",
                "Running the full test suite",
                {"target": "tests", "flags": "-q -n 4"},
                0.0,
                {"passed": 1184, "failed": 0},
                outcome="All 1184 tests passed",
            )
            running = sim.background(suite)
        with sim.step():
            spawn = Call(
                "spawn_agent",
                "Asking a reviewer to check the fix",
                {"agent": "reviewer", "task": "Review the redirect URI fix"},
                0.0,
                {"verdict": "approve"},
                outcome="The reviewer approved the fix",
            )
            with sim.subagent(spawn, "reviewer"):
                with sim.step():
                    sim.call(
                        Call(
                            "git_diff",
                            "Reviewing the diff",
                            {"paths": [module]},
                            sim.secs(0.05, 0.2),
                            {"files": 1, "insertions": 1, "deletions": 1},
                            outcome="Reviewed a one-line diff",
                        )
                    )
                with sim.step():
                    sim.parallel(
                        Call(
                            "search_code",
                            "Looking for other callers of validate_redirect",
                            {"query": "validate_redirect("},
                            sim.secs(0.3, 0.8),
                            {"matches": 2},
                            outcome="Found 2 other callers, both safe",
                        ),
                        Call(
                            "read_file",
                            "Reading the redirect allow-list",
                            {"path": "config/allowed_redirects.yaml"},
                            sim.secs(0.05, 0.2),
                            error=FileNotFoundError(
                                "[Errno 2] No such file or directory: "
                                "'config/allowed_redirects.yaml'"
                            ),
                        ),
                    )
        sim.wait(sim.secs(15, 40))
        sim.harvest(running, suite)
    with sim.turn(3), sim.step():
        sim.call(
            Call(
                "open_issue",
                None,
                {
                    "intent": "bug",
                    "title": "Redirect URIs were compared by prefix",
                    "body": f"Fixed in {module}; see {failing}.",
                },
                sim.secs(0.4, 1.0),
                {"number": rng.randint(300, 900)},
            )
        )
    return SessionPlan(sim.session_id, "Fix the failing OAuth callback test", "en")


def _pagination(sim: Sim, rng: random.Random) -> SessionPlan:
    """French: add pagination; a missing file, a cancelled test run, outcome patches."""
    routes = rng.randint(3, 7)
    with sim.turn(1):
        with sim.step("Exploration de l'API des commandes"):
            sim.parallel(
                Call(
                    "search_code",
                    "Recherche des routes de l'API des commandes",
                    {"query": '@router.get("/orders', "path": "api/"},
                    sim.secs(0.3, 0.9),
                    {"matches": routes},
                    patch=("Recherche des", f"{routes} trouvées :"),
                ),
                Call(
                    "read_file",
                    "Lecture du modèle Commande",
                    {"path": "api/models/order.py"},
                    sim.secs(0.05, 0.2),
                    {"lines": 140},
                    outcome="Modèle Commande lu (140 lignes)",
                ),
                Call(
                    "read_file",
                    "Lecture de la migration des commandes",
                    {"path": "migrations/0007_orders.py"},
                    sim.secs(0.05, 0.2),
                    error=FileNotFoundError(
                        "[Errno 2] No such file or directory: 'migrations/0007_orders.py'"
                    ),
                ),
            )
        with sim.step():
            sim.call(
                Call(
                    "edit_file",
                    "Ajout des paramètres limit et offset",
                    {"path": "api/routes/orders.py", "old": "def list_orders(", "new": "..."},
                    sim.secs(0.05, 0.2),
                    {"ok": True},
                    outcome="Paramètres limit et offset ajoutés",
                )
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Exécution des tests d'intégration",
                    {"target": "tests/integration", "flags": "-q"},
                    sim.secs(6, 12),
                    cancelled=True,  # the user stopped it: too slow
                )
            )
    with sim.turn(2), sim.step("Vérification ciblée"):
        sim.parallel(
            Call(
                "run_tests",
                "Exécution des tests de l'API des commandes",
                {"target": "tests/api/test_orders.py", "flags": "-q"},
                sim.secs(1.5, 3.0),
                {"passed": 18, "failed": 0},
                outcome="18 tests réussis",
            ),
            Call(
                "run_shell",
                "ページネーションの応答時間を計測しています",
                {"command": "python bench/orders.py --pages 50"},
                sim.secs(2.0, 4.0),
                {"p95_ms": 41},
                outcome="p95 は 41 ms でした",
            ),
        )
    return SessionPlan(sim.session_id, "Ajoute la pagination à l'API des commandes", "fr")


def _checkout(sim: Sim, rng: random.Random) -> SessionPlan:
    """Japanese: a slow checkout; a redacted tool, a scrubbed secret, a timeout."""
    slow_ms = rng.randint(1800, 4200)
    with sim.turn(1), sim.step("チェックアウトの遅延を調査"):
        sim.parallel(
            Call(
                "query_customers",
                "注文4411の顧客情報を確認しています",
                {"sql": "SELECT * FROM customers WHERE email = 'yuki.tanaka@example.jp'"},
                sim.secs(0.2, 0.6),
                {"rows": 1, "name": "Yuki Tanaka"},
                outcome="顧客情報を確認しました",
            ),
            Call(
                "run_shell",
                "遅いクエリのログを取得しています",
                {
                    "command": "psql postgresql://app:hunter2-s3cret@db.internal:5432/shop "
                    "-c 'SELECT * FROM pg_stat_statements LIMIT 5'",
                },
                sim.secs(0.8, 2.0),
                {"slowest_ms": slow_ms},
                outcome=f"最も遅いクエリは {slow_ms} ms",
            ),
            Call(
                "fetch_url",
                "決済プロバイダーの状態ページを確認しています",
                {"url": "https://status.payments.example.com/api/v2/status.json"},
                10.0,
                error=TimeoutError("timed out after 10 s"),
            ),
        )
    with sim.turn(2):
        with sim.step():
            sim.call(
                Call(
                    "edit_file",
                    "注文テーブルにインデックスを追加しています",
                    {"path": "migrations/0012_order_index.py", "old": "", "new": "CREATE INDEX"},
                    sim.secs(0.05, 0.2),
                    {"ok": True},
                    patch=("追加しています", "追加しました"),
                )
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Running the checkout tests",
                    {"target": "tests/checkout", "flags": "-q"},
                    sim.secs(2, 5),
                    {"passed": 57, "failed": 0},
                    outcome="57 checkout tests passed",
                )
            )
    return SessionPlan(sim.session_id, "チェックアウトが遅い原因を調べて", "ja")


SCRIPTS: Final[tuple[tuple[str, Callable[[Sim, random.Random], SessionPlan]], ...]] = (
    ("oauth", _oauth),
    ("pagination", _pagination),
    ("checkout", _checkout),
)


def session_ids(seed: int = DEFAULT_SEED, sessions: int = DEFAULT_SESSIONS) -> list[str]:
    """The session ids the demo writes for this seed (stable: re-running updates them)."""
    return [f"demo-{seed}-{n + 1}-{SCRIPTS[n % len(SCRIPTS)][0]}" for n in range(max(1, sessions))]
