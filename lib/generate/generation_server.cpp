#include "generate/generation_server.hpp"

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/signal_flag.hpp"
#include "generate/batch_answerer.hpp"
#include "generate/bounded_http_server.hpp"
#include "generate/generation_model.hpp"
#include "generate/request_queue.hpp"
#include "generate/server_response.hpp"

namespace mgt {

namespace {

// Bodies above this are refused (413) before they are read whole: 128 prompts of a model's
// context fit many times over.
constexpr size_t kMaxBodyBytes = 64u << 20;

// The thread that owns the model: loads it, says when it is ready (or why it could not be),
// then answers batches until the queue is closed and empty.
void serve_batches(const GenerateOptions& options, RequestQueue& queue, std::promise<int64_t>& ready) {
  bool is_ready = false;
  try {
    GenerateOptions load = options;
    // Requests may use every position of the model: the memory check must allow for it.
    load.generation.max_new_tokens = int64_t{1} << 40;
    GenerationModel loaded = load_generation_model(load);
    Generator generator(*loaded.model, *loaded.tokenizer, GenerationSettings{}, loaded.max_sequence_length);
    BatchAnswerer answerer(generator, *loaded.tokenizer, options.generation.seed, options.micro_batch_size);
    ready.set_value(generator.max_sequence_length());
    is_ready = true;
    for (;;) {
      std::vector<PendingRequest> batch = queue.next_batch();
      if (batch.empty()) break;
      answerer.answer(batch);
    }
  } catch (...) {
    if (!is_ready) {
      ready.set_exception(std::current_exception());
      return;
    }
    // Nothing can generate any more: refuse what waits and what comes (503), so that no HTTP
    // thread waits for ever.
    log::error("the generation thread stopped; requests are refused from now on");
    queue.close();
    for (std::vector<PendingRequest> batch = queue.next_batch(); !batch.empty(); batch = queue.next_batch())
      for (PendingRequest& pending : batch) pending.reply.set_value({503, server_error_json("generation failed")});
  }
}

std::string seconds_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

void handle_generate(RequestQueue& queue, const httplib::Request& http, httplib::Response& response) {
  const auto start = std::chrono::steady_clock::now();
  ServerReply reply;
  bool log_it = true;
  std::string what;  // stays empty for a body refused before it was understood
  try {
    ServerRequest request = parse_server_request(http.body);
    log_it = !request.no_log;
    what = std::to_string(request.prompts.size()) + " prompt" + (request.prompts.size() == 1 ? "" : "s") +
           ", tokens_to_generate " + std::to_string(request.tokens_to_generate);
    reply = queue.submit(std::move(request)).get();
  } catch (const BadRequest& e) {
    reply = {400, server_error_json(e.what())};
  } catch (const std::exception& e) {
    reply = {500, server_error_json(e.what())};
  }
  response.status = reply.status;
  response.set_content(reply.body, "application/json");
  if (!log_it) return;
  std::string line = "PUT /api from " + http.remote_addr + ": " + (what.empty() ? "" : what + ": ") +
                     std::to_string(reply.status);
  if (reply.status != 200) line += " " + reply.body;
  line += " in " + seconds_text(std::chrono::steady_clock::now() - start);
  if (reply.batch_requests > 1) line += " (batched with " + std::to_string(reply.batch_requests - 1) + " other requests)";
  log::info(line);
}

// RFC 9110's Content-Length is 1*DIGIT; httplib reads "-5" as a huge length (and refuses it as
// too large), so a malformed one is refused here, before the body would be read.
bool valid_content_length(const std::string& value) {
  return !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
}

void configure(BoundedHttpServer& server, RequestQueue& queue) {
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_pre_routing_handler([&server](const httplib::Request& request, httplib::Response& response) {
    if (!request.has_header("Content-Length") || valid_content_length(request.get_header_value("Content-Length")))
      return httplib::Server::HandlerResponse::Unhandled;
    response.status = 400;
    // The body's end is unknown: nothing more can be read from this connection.
    response.set_header("Connection", "close");
    server.close_after_answer();
    response.set_content(server_error_json("Content-Length must be a non-negative decimal integer, got '" +
                                           request.get_header_value("Content-Length") + "'"),
                         "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Put("/api", [&queue](const httplib::Request& request, httplib::Response& response) {
    handle_generate(queue, request, response);
  });
  auto wrong_method = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
    response.set_header("Allow", "PUT");
    response.set_content(server_error_json("use PUT to send a generation request to /api"), "application/json");
  };
  server.Get("/api", wrong_method);
  server.Post("/api", wrong_method);
  server.Delete("/api", wrong_method);
  // Refusals of httplib itself (unknown path, body too large, unreadable request) get the same
  // JSON body as ours.
  server.set_error_handler([&server](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    if (const auto cut = server.cut_short()) {
      response.status = cut->status;
      response.set_header("Connection", "close");
      response.set_content(server_error_json(cut->message), "application/json");
      return;
    }
    const std::string message = response.status == 404   ? "no such endpoint: " + request.path + " (use PUT /api)"
                                : response.status == 413 ? "the request body is too large"
                                                         : "the request could not be read";
    response.set_content(server_error_json(message), "application/json");
  });
}

}  // namespace

int run_generation_server(const GenerateOptions& options) {
  if (options.micro_batch_size < 1)
    throw UsageError("--micro-batch-size must be >= 1, got " + std::to_string(options.micro_batch_size));
  // Installed before any thread starts; the handler only sets a flag, which a thread below polls.
  SignalFlag signals({SIGINT, SIGTERM}, SignalFlag::Policy{false, true});
  RequestQueue queue(options.micro_batch_size);
  std::promise<int64_t> ready;
  std::future<int64_t> model_ready = ready.get_future();
  std::thread model_thread(serve_batches, std::cref(options), std::ref(queue), std::ref(ready));
  auto stop_model_thread = [&] {
    queue.close();
    model_thread.join();
  };
  int64_t positions = 0;
  try {
    positions = model_ready.get();
  } catch (...) {
    stop_model_thread();
    throw;
  }
  if (signals.raised()) {
    stop_model_thread();
    log::info("stopped by " + signal_name(signals.signal()) + " before serving");
    return kExitOk;
  }

  const ServerOptions& s = options.server;
  HttpServerLimits limits;
  limits.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(s.request_timeout * 1000.0 + 0.5));
  limits.max_connections = s.max_connections;
  BoundedHttpServer server(limits);
  configure(server, queue);
  const int port = s.port == 0 ? server.bind_to_any_port(s.host)
                               : (server.bind_to_port(s.host, static_cast<int>(s.port)) ? static_cast<int>(s.port) : -1);
  if (port <= 0) {
    stop_model_thread();
    throw Error("cannot listen on " + s.host + ":" + std::to_string(s.port) +
                " (the address is not this machine's, or the port is taken)");
  }
  log::info("serving Megatron's text generation API on http://" + s.host + ":" + std::to_string(port) +
            "/api (PUT; " + std::to_string(positions) + " positions, batches of up to " +
            std::to_string(options.micro_batch_size) + " prompts; at most " + std::to_string(s.max_connections) +
            " connections at once)");

  // httplib's stop() only takes effect once listening has begun, so the watcher waits for that.
  // Connections still reading a request end at once; those being answered get their answer.
  std::atomic<bool> listen_returned{false};
  std::thread signal_watcher([&] {
    while (!listen_returned.load()) {
      if (signals.raised() && server.is_running()) {
        server.stop_promptly();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const bool listened = server.listen_after_bind();
  listen_returned = true;
  signal_watcher.join();
  stop_model_thread();
  if (!signals.raised()) throw Error(listened ? "the server stopped unexpectedly" : "the server could not accept connections");
  log::info("stopped by " + signal_name(signals.signal()));
  return kExitOk;
}

}  // namespace mgt
