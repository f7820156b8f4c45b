#pragma once
// Server-sent events framing for the OpenAI streaming responses.
#include <nlohmann/json_fwd.hpp>

#include <string>

namespace specserve::server {

// "data: <json>\n\n". Invalid UTF-8 from a partial token can never reach here (the detokenizer
// holds incomplete sequences back), but the dump replaces it anyway rather than throwing.
std::string sse_data(const nlohmann::json& j);
// The terminator OpenAI clients wait for.
inline const char* sse_done() { return "data: [DONE]\n\n"; }
// A comment line: ignored by clients; keeps proxies and read timeouts happy and lets a write
// fail early when the client has gone away.
inline const char* sse_heartbeat() { return ": ping\n\n"; }

// JSON text for a response body (same invalid-UTF-8 policy).
std::string dump_json(const nlohmann::json& j);

}  // namespace specserve::server
