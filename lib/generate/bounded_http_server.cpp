#include "generate/bounded_http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace mgt {

namespace {

using Clock = std::chrono::steady_clock;

// Once the server stops, a connection has this long to write its answer, from its first write
// after the stop (an answer generated after the stop is still written).
constexpr std::chrono::seconds kWriteGrace{1};
// A write waits in slices of this, so that a stop is noticed while it waits.
constexpr std::chrono::milliseconds kWriteSlice{100};

enum class Cause { kNone, kTimeout, kStopping };

int milliseconds_until(Clock::time_point until, Clock::time_point now) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 1, 1000000));
}

std::chrono::milliseconds duration_of(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::microseconds(usec));
}

// An address as httplib's Request reports it: numeric host and port.
void address_of(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

struct BoundedHttpServer::Shared {
  explicit Shared(HttpServerLimits l) : limits(l) {}

  const HttpServerLimits limits;
  int stop_fd = -1;  // an eventfd, readable from the stop on (never drained)
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable slot_freed;
  int64_t slots_taken = 0;  // connections handed to the pool and not yet finished
};

namespace {

// One connection's socket as httplib's parser and writer see it (the shape of httplib's own
// SocketStream, with a buffer kept across the connection's requests): reads wait for data, the
// request's deadline and the server's stop together; writes for room, the write timeout and,
// after a stop, the grace.
class ConnectionStream final : public httplib::Stream {
public:
  ConnectionStream(socket_t sock, const BoundedHttpServer::Shared& shared, std::chrono::milliseconds read_timeout,
                   std::chrono::milliseconds write_timeout)
      : sock_(sock), shared_(shared), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // The next request's clock starts now.
  void start_request() { deadline_ = Clock::now() + shared_.limits.request_timeout; }
  // Until the next request's first byte: false when the keep-alive wait, the deadline or a stop
  // ends it first.
  bool wait_for_request(std::chrono::milliseconds keep_alive) const {
    return buffered() || wait_readable(std::min(Clock::now() + keep_alive, deadline_));
  }
  Cause cause() const { return cause_; }
  void close_reading() { reading_closed_ = true; }
  bool reading_closed() const { return reading_closed_; }

  bool is_readable() const override {
    return buffered() || wait_readable(std::min(Clock::now() + read_timeout_, deadline_));
  }
  bool is_writable() const override { return wait_writable(); }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (!wait_readable(std::min(Clock::now() + read_timeout_, deadline_))) return -1;
      ssize_t n;
      do n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_writable()) return -1;
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) address_of(address, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) address_of(address, ip, port);
  }
  socket_t socket() const override { return sock_; }

private:
  bool buffered() const { return begin_ < end_; }

  // Whether the socket has data (or its end) before `until`; records why not when the deadline
  // or a stop ended the wait.
  bool wait_readable(Clock::time_point until) const {
    if (reading_closed_) return false;
    for (;;) {
      if (shared_.stopping.load()) {
        cause_ = Cause::kStopping;
        return false;
      }
      const Clock::time_point now = Clock::now();
      if (now >= until) {
        if (until >= deadline_) cause_ = Cause::kTimeout;
        return false;
      }
      std::array<pollfd, 2> fds{pollfd{sock_, POLLIN, 0}, pollfd{shared_.stop_fd, POLLIN, 0}};
      const int ready = ::poll(fds.data(), fds.size(), milliseconds_until(until, now));
      if (ready < 0 && errno != EINTR) return false;
      if (ready > 0 && fds[1].revents != 0) continue;  // stopping: said above
      if (ready > 0 && fds[0].revents != 0) return true;  // data, the end, or an error: recv tells
    }
  }

  bool wait_writable() const {
    const Clock::time_point timeout = Clock::now() + write_timeout_;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (shared_.stopping.load() && grace_end_ == Clock::time_point::max()) grace_end_ = now + kWriteGrace;
      const Clock::time_point until = std::min(timeout, grace_end_);
      if (now >= until) return false;
      pollfd fd{sock_, POLLOUT, 0};
      const int ready = ::poll(&fd, 1, milliseconds_until(std::min(until, now + kWriteSlice), now));
      if (ready < 0 && errno != EINTR) return false;
      if (ready > 0) return true;  // room, or an error that send reports
    }
  }

  const socket_t sock_;
  const BoundedHttpServer::Shared& shared_;
  const std::chrono::milliseconds read_timeout_;
  const std::chrono::milliseconds write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool reading_closed_ = false;
  mutable Cause cause_ = Cause::kNone;
  mutable Clock::time_point grace_end_ = Clock::time_point::max();  // of writing, once stopping
  std::array<char, 4096> buffer_{};
  size_t begin_ = 0;
  size_t end_ = 0;
};

// The connection the calling thread serves (httplib serves each on one thread, start to end).
thread_local ConnectionStream* current_stream = nullptr;

// httplib's ThreadPool with a bound: enqueue, called by the accepting thread, waits while every
// thread serves a connection, so that further connections wait in the listening socket's queue
// (not in memory, each holding a descriptor). Once the server stops it waits no more: what it
// takes then is closed at once.
class BoundedPool final : public httplib::TaskQueue {
public:
  BoundedPool(BoundedHttpServer::Shared& shared) : shared_(shared) {
    const auto n = static_cast<size_t>(shared.limits.max_connections);
    threads_.reserve(n);
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }

  void enqueue(std::function<void()> job) override {
    {
      std::unique_lock<std::mutex> lock(shared_.mutex);
      shared_.slot_freed.wait(
          lock, [this] { return shared_.slots_taken < shared_.limits.max_connections || shared_.stopping.load(); });
      ++shared_.slots_taken;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shut_down_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !jobs_.empty() || shut_down_; });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
      {
        std::lock_guard<std::mutex> lock(shared_.mutex);
        --shared_.slots_taken;
      }
      shared_.slot_freed.notify_all();
    }
  }

  BoundedHttpServer::Shared& shared_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool shut_down_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

BoundedHttpServer::BoundedHttpServer(HttpServerLimits limits) : shared_(std::make_unique<Shared>(limits)) {
  if (limits.max_connections < 1) throw Error("BoundedHttpServer: max_connections must be >= 1");
  if (limits.request_timeout.count() <= 0) throw Error("BoundedHttpServer: request_timeout must be positive");
  shared_->stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (shared_->stop_fd < 0) throw Error(std::string("eventfd failed: ") + std::strerror(errno));
  Shared* shared = shared_.get();
  new_task_queue = [shared] { return new BoundedPool(*shared); };  // httplib owns and deletes it
}

BoundedHttpServer::~BoundedHttpServer() { ::close(shared_->stop_fd); }

void BoundedHttpServer::stop_promptly() {
  if (!shared_->stopping.load()) {
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      shared_->stopping.store(true);
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(shared_->stop_fd, &one, sizeof one);
    shared_->slot_freed.notify_all();
  }
  stop();  // httplib: closes the listening socket, once listening has begun
}

// httplib's own loop over a connection's requests (process_server_socket_core), with this
// class's stream and its stop.
bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  bool served = false;
  if (!shared_->stopping.load()) {
    ConnectionStream stream(sock, *shared_, duration_of(read_timeout_sec_, read_timeout_usec_),
                            duration_of(write_timeout_sec_, write_timeout_usec_));
    current_stream = &stream;
    try {
      for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
        stream.start_request();
        if (!stream.wait_for_request(std::chrono::seconds(keep_alive_timeout_sec_))) break;
        bool closed = false;
        served = process_request(stream, left == 1, closed, nullptr);
        // A request cut short leaves unread bytes of itself: nothing after them is a request.
        if (!served || closed || stream.reading_closed() || stream.cause() != Cause::kNone) break;
      }
    } catch (...) {
      served = false;  // httplib catches what handlers throw; anything else ends this connection alone
    }
    current_stream = nullptr;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

std::optional<BoundedHttpServer::CutShort> BoundedHttpServer::cut_short() const {
  const ConnectionStream* s = current_stream;
  if (s == nullptr) return std::nullopt;
  if (s->cause() == Cause::kTimeout) {
    char text[160];
    std::snprintf(text, sizeof text, "the request was not received within %g s (--server-request-timeout)",
                  std::chrono::duration<double>(shared_->limits.request_timeout).count());
    return CutShort{408, text};
  }
  if (s->cause() == Cause::kStopping) return CutShort{503, "the server is stopping"};
  return std::nullopt;
}

void BoundedHttpServer::close_after_answer() {
  if (current_stream != nullptr) current_stream->close_reading();
}

}  // namespace mgt
