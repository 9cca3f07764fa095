CREATE TABLE schema_migrations (name text NOT NULL PRIMARY KEY, applied_ns bigint NOT NULL);
CREATE TABLE anchors (
  tool_call_id text NOT NULL PRIMARY KEY,
  session_id text NOT NULL DEFAULT '',
  seq bigint NOT NULL,
  settle_seq bigint,
  turn bigint,
  batch_id text,
  parent_call_id text,
  agent_id text,
  tool_name text NOT NULL,
  intent text,
  outcome text,
  label text NOT NULL,
  status text NOT NULL,
  start_ns bigint NOT NULL,
  end_ns bigint,
  duration_ms double precision,
  trace_id text,
  span_id text,
  error text,
  args text,
  result text,
  redaction text,
  updated_ns bigint NOT NULL
);
CREATE INDEX anchors_session_seq ON anchors (session_id, seq);
CREATE INDEX anchors_updated ON anchors (updated_ns);
CREATE INDEX anchors_live ON anchors (status, start_ns) WHERE status IN ('streaming', 'in_flight', 'background');
CREATE TABLE sessions (session_id text NOT NULL PRIMARY KEY, next_seq bigint NOT NULL DEFAULT 1, last_turn bigint NOT NULL DEFAULT 0, first_ns bigint, last_ns bigint);
CREATE INDEX sessions_last ON sessions (last_ns);
CREATE TABLE blocks (session_id text NOT NULL, batch_id text NOT NULL, turn bigint, activity_label text, seq bigint NOT NULL, PRIMARY KEY (session_id, batch_id));
CREATE TABLE dropped (session_id text NOT NULL, source text NOT NULL, count bigint NOT NULL, first_ns bigint NOT NULL, last_ns bigint NOT NULL, PRIMARY KEY (session_id, source));
ALTER TABLE anchors ADD COLUMN provider_call_id text;
ALTER TABLE anchors ADD COLUMN version bigint NOT NULL DEFAULT 0;
UPDATE anchors SET provider_call_id = tool_call_id WHERE NOT (length(tool_call_id) = 49 AND substr(tool_call_id, 33, 1) = ':');
UPDATE anchors AS a SET version = o.n FROM (SELECT tool_call_id, row_number() OVER (ORDER BY updated_ns, tool_call_id) AS n FROM anchors) AS o WHERE a.tool_call_id = o.tool_call_id;
CREATE INDEX anchors_version ON anchors (version);
CREATE INDEX anchors_provider ON anchors (provider_call_id) WHERE provider_call_id IS NOT NULL;
CREATE TABLE ledger_clock (id bigint NOT NULL PRIMARY KEY CHECK (id = 1), next_version bigint NOT NULL);
INSERT INTO ledger_clock (id, next_version) SELECT 1, coalesce(max(version), 0) + 1 FROM anchors;
INSERT INTO schema_migrations (name, applied_ns) VALUES ('0001_anchors_sessions_blocks', 1796476004765068820);
INSERT INTO schema_migrations (name, applied_ns) VALUES ('0002_dropped', 1796476004769962723);
INSERT INTO schema_migrations (name, applied_ns) VALUES ('0003_provider_call_id_and_row_versions', 1796476004787916645);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('0af7651916cd43dd8448eb211c80319c:b7ad6b7169203331', 'conv-b', 5, 6, 2, 'step-2', NULL, NULL, 'search_code', 'Listing the repo', 'Listed 40 files', 'Listed 40 files', 'success', 1760000004000000000, 1760000004400000000, 400.0, '00000000000000000000000000000005', '0000000000000005', NULL, '{"q": 4}', NULL, NULL, 1796476004791968615, NULL, 5);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('call_0', 'conv-a', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Searching for OAuth', 'Found 3 handlers', 'Found 3 handlers', 'success', 1760000000000000000, 1760000000400000000, 400.0, '00000000000000000000000000000001', '0000000000000001', NULL, '{"q": 0}', NULL, NULL, 1796476004791968611, NULL, 1);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('call_0x', '', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Grepping the logs', NULL, 'Grepping the logs', 'success', 1760000006000000000, 1760000006400000000, 400.0, '00000000000000000000000000000007', '0000000000000007', NULL, '{"q": 6}', NULL, NULL, 1796476004791968617, NULL, 7);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('call_1', 'conv-a', 3, 4, 1, 'step-1', NULL, NULL, 'search_code', 'Reading the router', NULL, 'Reading the router · failed', 'error', 1760000001000000000, 1760000001400000000, 400.0, '00000000000000000000000000000002', '0000000000000002', 'FileNotFoundError: router.py', '{"q": 1}', NULL, NULL, 1796476004791968612, NULL, 2);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('call_live', 'conv-c', 1, NULL, 1, 'step-1', NULL, NULL, 'search_code', 'Indexing the docs', NULL, 'Indexing the docs', 'in_flight', 1760000005000000000, NULL, NULL, '00000000000000000000000000000006', '0000000000000006', NULL, '{"q": 5}', NULL, NULL, 1796476004791968616, NULL, 6);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('toolu_01A', 'conv-b', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Asking the reviewer', 'Reviewer approved', 'Reviewer approved', 'success', 1760000002000000000, 1760000002400000000, 400.0, '00000000000000000000000000000003', '0000000000000003', NULL, '{"q": 2}', NULL, NULL, 1796476004791968613, NULL, 3);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns, provider_call_id, version) VALUES ('toolu_01B', 'conv-b', 3, 4, 1, 'step-1', 'toolu_01A', NULL, 'search_code', 'Diffing the branch', '12 files changed', '12 files changed', 'success', 1760000003000000000, 1760000003400000000, 400.0, '00000000000000000000000000000004', '0000000000000004', NULL, '{"q": 3}', NULL, NULL, 1796476004791968614, NULL, 4);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('', 3, 1, 1760000006000000000, 1760000006400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-a', 5, 1, 1760000000000000000, 1760000001400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-b', 8, 2, 1760000002000000000, 1760000004400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-c', 2, 1, 1760000005000000000, 1760000005000000000);
INSERT INTO blocks (session_id, batch_id, turn, activity_label, seq) VALUES ('conv-b', 'step-1', 1, 'Reviewing the change', 7);
DELETE FROM ledger_clock;
INSERT INTO ledger_clock (id, next_version) VALUES (1, 8);
