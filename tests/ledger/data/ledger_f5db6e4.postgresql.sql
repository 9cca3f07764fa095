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
INSERT INTO schema_migrations (name, applied_ns) VALUES ('0001_anchors_sessions_blocks', 1796356511634072536);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('0af7651916cd43dd8448eb211c80319c:b7ad6b7169203331', 'conv-b', 5, 6, 2, 'step-2', NULL, NULL, 'search_code', 'Listing the repo', 'Listed 40 files', 'Listed 40 files', 'success', 1760000004000000000, 1760000004400000000, 400.0, '00000000000000000000000000000005', '0000000000000005', NULL, '{"q": 4}', NULL, NULL, 1796356511642927187);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('call_0', 'conv-a', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Searching for OAuth', 'Found 3 handlers', 'Found 3 handlers', 'success', 1760000000000000000, 1760000000400000000, 400.0, '00000000000000000000000000000001', '0000000000000001', NULL, '{"q": 0}', NULL, NULL, 1796356511642927183);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('call_0x', '', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Grepping the logs', NULL, 'Grepping the logs', 'success', 1760000006000000000, 1760000006400000000, 400.0, '00000000000000000000000000000007', '0000000000000007', NULL, '{"q": 6}', NULL, NULL, 1796356511642927189);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('call_1', 'conv-a', 3, 4, 1, 'step-1', NULL, NULL, 'search_code', 'Reading the router', NULL, 'Reading the router · failed', 'error', 1760000001000000000, 1760000001400000000, 400.0, '00000000000000000000000000000002', '0000000000000002', 'FileNotFoundError: router.py', '{"q": 1}', NULL, NULL, 1796356511642927184);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('call_live', 'conv-c', 1, NULL, 1, 'step-1', NULL, NULL, 'search_code', 'Indexing the docs', NULL, 'Indexing the docs', 'in_flight', 1760000005000000000, NULL, NULL, '00000000000000000000000000000006', '0000000000000006', NULL, '{"q": 5}', NULL, NULL, 1796356511642927188);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('toolu_01A', 'conv-b', 1, 2, 1, 'step-1', NULL, NULL, 'search_code', 'Asking the reviewer', 'Reviewer approved', 'Reviewer approved', 'success', 1760000002000000000, 1760000002400000000, 400.0, '00000000000000000000000000000003', '0000000000000003', NULL, '{"q": 2}', NULL, NULL, 1796356511642927185);
INSERT INTO anchors (tool_call_id, session_id, seq, settle_seq, turn, batch_id, parent_call_id, agent_id, tool_name, intent, outcome, label, status, start_ns, end_ns, duration_ms, trace_id, span_id, error, args, result, redaction, updated_ns) VALUES ('toolu_01B', 'conv-b', 3, 4, 1, 'step-1', 'toolu_01A', NULL, 'search_code', 'Diffing the branch', '12 files changed', '12 files changed', 'success', 1760000003000000000, 1760000003400000000, 400.0, '00000000000000000000000000000004', '0000000000000004', NULL, '{"q": 3}', NULL, NULL, 1796356511642927186);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('', 3, 1, 1760000006000000000, 1760000006400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-a', 5, 1, 1760000000000000000, 1760000001400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-b', 8, 2, 1760000002000000000, 1760000004400000000);
INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES ('conv-c', 2, 1, 1760000005000000000, 1760000005000000000);
INSERT INTO blocks (session_id, batch_id, turn, activity_label, seq) VALUES ('conv-b', 'step-1', 1, 'Reviewing the change', 7);
