// An HTTP server whose clients cannot hold it: cpp-httplib's server (0.11, Debian 12) times out
// each read of a socket separately, so a client that sends one byte of its request every few
// seconds keeps a thread for as long as it likes, a few such clients keep every thread, and
// stopping the server waits for all of them. This server gives each request a deadline for its
// headers and body together, serves at most a bounded number of connections at once (further
// ones wait in the listening socket's queue), and stops promptly: a connection waiting for or
// reading a request ends at once, one whose request is being answered gets its answer (with a
// second to write it).
//
// httplib keeps the HTTP parsing and the routing; this class serves each connection itself
// (httplib's process_and_close_socket is virtual for this) through a stream of its own, whose
// reads wait for the socket, the request's deadline and the server's stop together.
#pragma once
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mgt {

struct HttpServerLimits {
  // The time a client has to send one request, headers and body, from the connection's start
  // or from the previous answer.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  // Connections served at once; each has a thread.
  int64_t max_connections = 128;
};

class BoundedHttpServer : public httplib::Server {
public:
  explicit BoundedHttpServer(HttpServerLimits limits);
  ~BoundedHttpServer() override;
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  // Stops listening and ends every connection's wait for or reading of a request; answers being
  // written get a second. Safe from any thread, any number of times, before or after listening
  // began (httplib's stop() only acts once listening has begun: call it again then).
  void stop_promptly();

  // Why the calling thread's connection stopped reading (its deadline passed, or the server is
  // stopping), as an HTTP status and a message; none when it did not. For the error handler,
  // which runs on the connection's thread.
  struct CutShort {
    int status;
    std::string message;
  };
  std::optional<CutShort> cut_short() const;

  // The calling thread's connection reads no more requests: it ends once its answer is written.
  void close_after_answer();

  struct Shared;  // the limits, the stop signal, the count of connections (for the .cpp's classes)

private:
  bool process_and_close_socket(socket_t sock) override;

  std::unique_ptr<Shared> shared_;
};

}  // namespace mgt
