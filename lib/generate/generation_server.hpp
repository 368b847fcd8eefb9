// mgt-generate --server: Megatron's text-generation REST API (tools/run_text_generation_server.py,
// megatron/core/inference/text_generation_server/text_generation_server.py): `PUT /api` with a
// JSON body of prompts and sampling settings, answered with the completed texts.
//
// One thread owns the model (it loads it, so a GPU is used from the thread that set it up) and
// answers the requests of a queue; the HTTP threads parse and check a request, queue it and wait
// for its answer. Requests that arrive while a batch is generated wait and go together into the
// next batch. SIGINT or SIGTERM stop the server: it stops accepting, ends the connections still
// sending a request, answers what it has taken, and returns. Each request has a deadline for its
// headers and body, and the connections served at once are bounded (bounded_http_server.hpp).
//
// Built into its own library target (mgt-generate-server) so that only mgt-generate links
// cpp-httplib.
#pragma once
#include "generate/generate_job.hpp"

namespace mgt {

// Returns the exit code (0 when stopped by a signal); throws mgt::Error when the model cannot be
// loaded or the address cannot be listened on.
int run_generation_server(const GenerateOptions& options);

}  // namespace mgt
