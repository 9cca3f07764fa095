"""A labelled set of intents for the vagueness measure: six languages, five tools, vague and
specific intents written the way agents write them (a few hundred in all).

``V`` marks a vague intent (it says little or nothing beyond what the tool and its other calls
say: too short, only the tool's name, only the words every intent of the tool uses), ``S`` a
specific one (it names what the call is about). Each language also has templated intents that
name a file (``Reading file src/db.py``, ``src/api.py``, ...: specific, though every word of
the template repeats) and near-misses beside them (``Reading this file``; ``Reading the
file.``, whose full stop names nothing). ``bench/vagueness.py`` prints precision and
recall per language; ``test_vagueness_set.py`` holds them to a floor.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Labelled(NamedTuple):
    language: str
    tool: str
    intent: str
    vague: bool


_EN = """
read_file|V|Reading
read_file|V|Reading the file
read_file|V|Reading a file
read_file|V|Running read_file
read_file|S|Reading the OAuth callback router
read_file|S|Reading the config file for the billing service
read_file|S|Reading src/auth/session.py to find the token refresh
read_file|S|Reading the changelog for the 2.4 release
read_file|S|Reading the file with the retry policy
read_file|S|Reading the pytest fixtures in conftest.py
read_file|S|Reading file src/db.py
read_file|S|Reading file src/api.py
read_file|S|Reading file src/cli.py
read_file|S|Reading file src/app.py
read_file|V|Reading this file
read_file|V|Reading the file.
search_code|V|Search
search_code|V|Searching the code
search_code|V|Searching for code
search_code|V|Running search_code
search_code|S|Searching for where the rate limiter is configured
search_code|S|Searching the code for uses of parse_date
search_code|S|Searching for the webhook signature check
search_code|S|Searching for callers of the payment client
search_code|S|Grepping TODOs
search_code|S|Searching for the database connection pool size
run_shell|V|Running
run_shell|V|Running a command
run_shell|V|Running the command
run_shell|V|Running run_shell
run_shell|S|Running the unit tests of the billing module
run_shell|S|Running npm install to pull the new lockfile
run_shell|S|Running the database migration on staging
run_shell|S|Running git log to find who changed the router
run_shell|S|Running the linter on the api package
run_shell|S|Building the docker image for the worker
edit_file|V|Editing
edit_file|V|Editing the file
edit_file|V|Making an edit
edit_file|V|Running edit_file
edit_file|S|Editing the retry count in the http client
edit_file|S|Fixing the off-by-one in the pagination helper
edit_file|S|Editing the README to document the new flag
edit_file|S|Renaming the user_id column in the migration
edit_file|S|Adding a timeout to the webhook handler
edit_file|S|Editing the file to add the missing import
web_search|V|Searching the web
web_search|V|Searching
web_search|V|Searching online
web_search|V|Running web_search
web_search|S|Searching the web for the Stripe webhook retry schedule
web_search|S|Looking up the Python 3.12 changelog for asyncio
web_search|S|Searching for the OpenTelemetry span limits docs
web_search|S|Searching the web for the postgres error 53100
web_search|S|Looking up how duckdb handles nested lists
web_search|S|Searching online for the React 19 migration guide
"""

_DE = """
read_file|V|Lesen
read_file|V|Lese die Datei
read_file|V|Datei lesen
read_file|V|Ich lese die Datei
read_file|S|Lese die Konfiguration des Abrechnungsdienstes
read_file|S|Lese die Datei setup.cfg
read_file|S|Lese den OAuth-Callback-Router
read_file|S|Ich lese die Datei mit der Wiederholungsstrategie
read_file|S|Lese das Änderungsprotokoll der Version 2.4
read_file|S|Lese die Testdaten in conftest.py
read_file|S|Lese Datei src/db.py
read_file|S|Lese Datei src/api.py
read_file|S|Lese Datei src/cli.py
read_file|S|Lese Datei src/app.py
read_file|V|Lese diese Datei
read_file|V|Lese die Datei.
search_code|V|Suche
search_code|V|Suche im Code
search_code|V|Code durchsuchen
search_code|V|Ich suche im Code
search_code|S|Suche die Stelle, an der das Ratenlimit gesetzt wird
search_code|S|Suche im Code nach Aufrufen von parse_date
search_code|S|Suche nach der Prüfung der Webhook-Signatur
search_code|S|Suche die Aufrufer des Zahlungsclients
search_code|S|Suche im Code nach TODOs
search_code|S|Suche nach der Größe des Verbindungspools
run_shell|V|Ausführen
run_shell|V|Führe einen Befehl aus
run_shell|V|Befehl ausführen
run_shell|V|Ich führe den Befehl aus
run_shell|S|Führe die Unit-Tests des Abrechnungsmoduls aus
run_shell|S|Führe npm install für die neue Lockdatei aus
run_shell|S|Führe die Datenbankmigration auf Staging aus
run_shell|S|Führe git log aus, um die Änderung am Router zu finden
run_shell|S|Führe den Linter auf dem api-Paket aus
run_shell|S|Baue das Docker-Image für den Worker
edit_file|V|Bearbeiten
edit_file|V|Bearbeite die Datei
edit_file|V|Datei bearbeiten
edit_file|V|Ich bearbeite die Datei
edit_file|S|Bearbeite die Anzahl der Wiederholungen im HTTP-Client
edit_file|S|Behebe den Off-by-one-Fehler in der Seitennummerierung
edit_file|S|Ergänze die README um das neue Flag
edit_file|S|Benenne die Spalte user_id in der Migration um
edit_file|S|Füge dem Webhook-Handler ein Zeitlimit hinzu
edit_file|S|Bearbeite die Datei und ergänze den fehlenden Import
web_search|V|Websuche
web_search|V|Suche im Web
web_search|V|Im Internet suchen
web_search|V|Ich suche im Web
web_search|S|Suche im Web nach dem Wiederholungsplan der Stripe-Webhooks
web_search|S|Suche das Changelog von Python 3.12 zu asyncio
web_search|S|Suche die Dokumentation der OpenTelemetry-Span-Limits
web_search|S|Suche im Web nach dem Postgres-Fehler 53100
web_search|S|Suche, wie DuckDB verschachtelte Listen behandelt
web_search|S|Suche im Web nach der Migrationsanleitung für React 19
"""

_FR = """
read_file|V|Lecture
read_file|V|Je lis le fichier
read_file|V|Lecture du fichier
read_file|V|Lire le fichier
read_file|S|Lecture du routeur de callback OAuth
read_file|S|Je lis la configuration du service de facturation
read_file|S|Lecture de src/auth/session.py pour trouver le rafraîchissement du jeton
read_file|S|Je lis le journal des modifications de la version 2.4
read_file|S|Lecture du fichier de la politique de nouvelle tentative
read_file|S|Je lis les fixtures pytest dans conftest.py
read_file|S|Lecture du fichier src/db.py
read_file|S|Lecture du fichier src/api.py
read_file|S|Lecture du fichier src/cli.py
read_file|S|Lecture du fichier src/app.py
read_file|V|Lecture de ce fichier
read_file|V|Je lis le fichier.
search_code|V|Recherche
search_code|V|Je cherche dans le code
search_code|V|Recherche dans le code
search_code|V|Chercher dans le code
search_code|S|Je cherche où le limiteur de débit est configuré
search_code|S|Recherche des appels à parse_date dans le code
search_code|S|Je cherche la vérification de signature des webhooks
search_code|S|Recherche des appelants du client de paiement
search_code|S|Recherche des TODO dans le code
search_code|S|Je cherche la taille du pool de connexions
run_shell|V|Exécution
run_shell|V|J'exécute une commande
run_shell|V|Exécution de la commande
run_shell|V|Exécuter la commande
run_shell|S|J'exécute les tests unitaires du module de facturation
run_shell|S|Exécution de npm install pour le nouveau lockfile
run_shell|S|J'exécute la migration de la base sur staging
run_shell|S|Exécution de git log pour trouver qui a modifié le routeur
run_shell|S|J'exécute le linter sur le paquet api
run_shell|S|Construction de l'image docker du worker
edit_file|V|Modification
edit_file|V|Je modifie le fichier
edit_file|V|Modification du fichier
edit_file|V|Modifier le fichier
edit_file|S|Je modifie le nombre de tentatives du client http
edit_file|S|Correction du décalage d'un dans la pagination
edit_file|S|Je documente le nouveau drapeau dans le README
edit_file|S|Renommage de la colonne user_id dans la migration
edit_file|S|J'ajoute un délai au gestionnaire de webhooks
edit_file|S|Modification du fichier pour ajouter l'import manquant
web_search|V|Recherche web
web_search|V|Je cherche sur le web
web_search|V|Recherche sur internet
web_search|V|Chercher sur le web
web_search|S|Je cherche sur le web le calendrier des tentatives des webhooks Stripe
web_search|S|Recherche du changelog de Python 3.12 pour asyncio
web_search|S|Je cherche la documentation des limites de span OpenTelemetry
web_search|S|Recherche sur le web de l'erreur postgres 53100
web_search|S|Je cherche comment DuckDB gère les listes imbriquées
web_search|S|Recherche du guide de migration vers React 19
"""

_ES = """
read_file|V|Leyendo
read_file|V|Leyendo el archivo
read_file|V|Leer el archivo
read_file|V|Estoy leyendo el archivo
read_file|S|Leyendo el enrutador de callback de OAuth
read_file|S|Leyendo la configuración del servicio de facturación
read_file|S|Leyendo src/auth/session.py para encontrar la renovación del token
read_file|S|Leyendo el registro de cambios de la versión 2.4
read_file|S|Leyendo el archivo con la política de reintentos
read_file|S|Leyendo los fixtures de pytest en conftest.py
read_file|S|Leyendo el archivo src/db.py
read_file|S|Leyendo el archivo src/api.py
read_file|S|Leyendo el archivo src/cli.py
read_file|S|Leyendo el archivo src/app.py
read_file|V|Leyendo este archivo
read_file|V|Leo el archivo.
search_code|V|Buscando
search_code|V|Buscando en el código
search_code|V|Buscar en el código
search_code|V|Estoy buscando en el código
search_code|S|Buscando dónde se configura el limitador de tasa
search_code|S|Buscando en el código los usos de parse_date
search_code|S|Buscando la verificación de firma de los webhooks
search_code|S|Buscando quién llama al cliente de pagos
search_code|S|Buscando los TODO en el código
search_code|S|Buscando el tamaño del pool de conexiones
run_shell|V|Ejecutando
run_shell|V|Ejecutando un comando
run_shell|V|Ejecutar el comando
run_shell|V|Estoy ejecutando el comando
run_shell|S|Ejecutando las pruebas unitarias del módulo de facturación
run_shell|S|Ejecutando npm install para el nuevo lockfile
run_shell|S|Ejecutando la migración de la base de datos en staging
run_shell|S|Ejecutando git log para ver quién cambió el enrutador
run_shell|S|Ejecutando el linter sobre el paquete api
run_shell|S|Construyendo la imagen docker del worker
edit_file|V|Editando
edit_file|V|Editando el archivo
edit_file|V|Editar el archivo
edit_file|V|Estoy editando el archivo
edit_file|S|Editando el número de reintentos del cliente http
edit_file|S|Corrigiendo el error por uno en la paginación
edit_file|S|Editando el README para documentar la nueva opción
edit_file|S|Renombrando la columna user_id en la migración
edit_file|S|Añadiendo un tiempo límite al manejador de webhooks
edit_file|S|Editando el archivo para añadir el import que falta
web_search|V|Buscando en la web
web_search|V|Búsqueda web
web_search|V|Buscar en internet
web_search|V|Estoy buscando en la web
web_search|S|Buscando en la web el calendario de reintentos de los webhooks de Stripe
web_search|S|Buscando el changelog de Python 3.12 sobre asyncio
web_search|S|Buscando la documentación de los límites de span de OpenTelemetry
web_search|S|Buscando en la web el error 53100 de postgres
web_search|S|Buscando cómo maneja DuckDB las listas anidadas
web_search|S|Buscando la guía de migración a React 19
"""

_JA = """
read_file|V|読む
read_file|V|ファイルを読んでいます
read_file|V|ファイルを読み込み中
read_file|V|ファイルを確認しています
read_file|S|OAuthのコールバックルーターを読んでいます
read_file|S|課金サービスの設定ファイルを読んでいます
read_file|S|トークン更新を探すためにsrc/auth/session.pyを読んでいます
read_file|S|バージョン2.4の変更履歴を読んでいます
read_file|S|リトライ方針のファイルを読み込み中
read_file|S|conftest.pyのpytestフィクスチャを確認しています
read_file|S|src/db.pyを読んでいます
read_file|S|src/api.pyを読んでいます
read_file|S|src/cli.pyを読んでいます
read_file|S|src/app.pyを読んでいます
read_file|V|このファイルを読んでいます
read_file|V|ファイルを読みます。
search_code|V|検索中
search_code|V|コードを検索しています
search_code|V|コードを検索中
search_code|V|コードを探しています
search_code|S|レートリミッターの設定箇所を検索しています
search_code|S|parse_dateの呼び出し元をコードから検索中
search_code|S|Webhook署名の検証処理を探しています
search_code|S|決済クライアントの呼び出し箇所を検索しています
search_code|S|TODOを検索
search_code|S|コネクションプールのサイズ設定を探しています
run_shell|V|実行中
run_shell|V|コマンドを実行しています
run_shell|V|コマンドを実行中
run_shell|V|コマンドを実行します
run_shell|S|課金モジュールの単体テストを実行しています
run_shell|S|新しいロックファイルのためにnpm installを実行中
run_shell|S|ステージングでデータベースのマイグレーションを実行しています
run_shell|S|ルーターを変更した人を調べるためgit logを実行中
run_shell|S|apiパッケージにリンターを実行しています
run_shell|S|ワーカーのDockerイメージをビルドしています
edit_file|V|編集中
edit_file|V|ファイルを編集しています
edit_file|V|ファイルを編集中
edit_file|V|ファイルを修正しています
edit_file|S|HTTPクライアントのリトライ回数を編集しています
edit_file|S|ページネーションのオフバイワンを修正しています
edit_file|S|新しいフラグをREADMEに追記しています
edit_file|S|マイグレーションのuser_id列の名前を変更中
edit_file|S|Webhookハンドラーにタイムアウトを追加しています
edit_file|S|不足しているimportを追加するためファイルを編集中
web_search|V|ウェブ検索
web_search|V|ウェブで検索しています
web_search|V|ネットで調べています
web_search|V|ウェブを検索中
web_search|S|StripeのWebhook再試行スケジュールをウェブで検索しています
web_search|S|Python 3.12のasyncioの変更点を調べています
web_search|S|OpenTelemetryのスパン制限のドキュメントを検索中
web_search|S|postgresのエラー53100をウェブで検索しています
web_search|S|DuckDBがネストしたリストをどう扱うか調べています
web_search|S|React 19への移行ガイドを検索中
"""

_ZH = """
read_file|V|读取
read_file|V|读取文件
read_file|V|正在读取文件
read_file|V|查看文件
read_file|S|读取OAuth回调路由
read_file|S|读取计费服务的配置文件
read_file|S|读取src/auth/session.py查找令牌刷新
read_file|S|查看2.4版本的更新日志
read_file|S|读取重试策略所在的文件
read_file|S|正在读取conftest.py里的pytest夹具
read_file|S|读取文件src/db.py
read_file|S|读取文件src/api.py
read_file|S|读取文件src/cli.py
read_file|S|读取文件src/app.py
read_file|V|读取这个文件
read_file|V|读一下文件。
search_code|V|搜索
search_code|V|搜索代码
search_code|V|正在搜索代码
search_code|V|在代码里查找
search_code|S|搜索限流器的配置位置
search_code|S|在代码里查找parse_date的调用
search_code|S|搜索Webhook签名校验
search_code|S|查找支付客户端的调用方
search_code|S|搜索TODO
search_code|S|正在搜索连接池大小的设置
run_shell|V|执行
run_shell|V|执行命令
run_shell|V|正在执行命令
run_shell|V|运行命令
run_shell|S|运行计费模块的单元测试
run_shell|S|执行npm install以更新锁文件
run_shell|S|在预发环境执行数据库迁移
run_shell|S|运行git log查看谁改了路由
run_shell|S|对api包运行代码检查
run_shell|S|正在构建worker的Docker镜像
edit_file|V|编辑
edit_file|V|编辑文件
edit_file|V|正在编辑文件
edit_file|V|修改文件
edit_file|S|修改HTTP客户端的重试次数
edit_file|S|修复分页里的差一错误
edit_file|S|在README里说明新参数
edit_file|S|重命名迁移中的user_id列
edit_file|S|给Webhook处理器加上超时
edit_file|S|编辑文件补上缺少的import
web_search|V|网上搜索
web_search|V|在网上搜索
web_search|V|正在网上查找
web_search|V|上网查一下
web_search|S|在网上搜索Stripe Webhook的重试时间表
web_search|S|查找Python 3.12中asyncio的变更
web_search|S|搜索OpenTelemetry跨度限制的文档
web_search|S|在网上搜索postgres错误53100
web_search|S|查找DuckDB如何处理嵌套列表
web_search|S|搜索React 19迁移指南
"""

LANGUAGES: Final = {"en": _EN, "de": _DE, "fr": _FR, "es": _ES, "ja": _JA, "zh": _ZH}


def labelled() -> list[Labelled]:
    """Every labelled intent, language by language."""
    out: list[Labelled] = []
    for language, text in LANGUAGES.items():
        for line in text.strip().splitlines():
            tool, label, intent = line.split("|", 2)
            out.append(Labelled(language, tool, intent, label == "V"))
    return out


def classify(url: str, params: dict[str, object] | None = None) -> list[str | None]:
    """The ``vague_intents`` reason of every labelled intent (None: specific), from a real
    ledger at ``url`` written with the whole set (each intent one call of its tool, in a
    session of its own, so ``reused`` never applies)."""
    # the analytics extra and the ledger load only when the set is measured
    from tracing.analytics import Analytics, AnalyticsOptions
    from tracing.analytics._definitions import normalize_intent
    from tracing.ledger import open_ledger
    from tracing.status import Status

    items = labelled()
    ledger = open_ledger(url)
    try:
        for i, item in enumerate(items):
            ledger.record(
                {
                    "tool_call_id": f"v{i}",
                    "tool_name": item.tool,
                    "status": Status.SUCCESS,
                    "session_id": f"s{i}",
                    "intent": item.intent,
                    "args": f'{{"n": {i}}}',
                    "start_ns": 1_767_225_600_000_000_000 + i,
                    "end_ns": 1_767_225_600_000_000_000 + i + 1,
                }
            )
        assert ledger.flush(30.0)
    finally:
        ledger.close()
    with Analytics(url, options=AnalyticsOptions(snapshot=False)) as engine:
        result = engine.run("vague_intents", {**(params or {}), "by": "intent", "min_calls": 1})
    reasons = {(r[0], r[1]): r[4] for r in result.rows}
    return [reasons[(item.tool, normalize_intent(item.intent))] for item in items]


def scores(predicted: list[str | None]) -> dict[str, tuple[float, float, int, int, int]]:
    """Per language: (precision, recall, true positives, false positives, false negatives) of
    "vague" against the labels."""
    out: dict[str, tuple[float, float, int, int, int]] = {}
    items = labelled()
    for language in LANGUAGES:
        tp = fp = fn = 0
        for item, reason in zip(items, predicted, strict=True):
            if item.language != language:
                continue
            said = reason is not None
            tp += said and item.vague
            fp += said and not item.vague
            fn += item.vague and not said
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        out[language] = (precision, recall, tp, fp, fn)
    return out
