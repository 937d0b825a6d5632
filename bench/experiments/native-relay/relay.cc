// A native byte relay for established plain-TCP tunnels (a prototype, see README.md).
//
// One native thread owns an epoll set and relays bytes between the two descriptors of each tunnel
// with a fixed 64 KB buffer (read, then write to the other side; only when a write is short are
// the rest kept for that tunnel, and reading from the source stops until they are written: the
// same back-pressure a pipe gives). JavaScript keeps control: it adds a tunnel (the addon takes
// its own duplicates of the two descriptors, so JavaScript closes its sockets at once), closes one,
// reads its byte counts, and is told, through a thread-safe function, when a side closed (then
// the other side is closed too) or when no client byte came for the tunnel's silence time.
//
// Why not splice(2): it moves bytes through a pipe, 2 more descriptors per direction, 4 per
// tunnel, which would cut the tunnels a descriptor limit allows by three, and for frames of a
// few hundred bytes it costs the same 2 system calls per chunk as read + write.
#include <node_api.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kBufSize = 64 * 1024;
constexpr int kMaxEvents = 256;

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

struct Tunnel;

// One descriptor of a tunnel; epoll's data.ptr points here.
struct Side {
  Tunnel* t;
  int fd;
  bool client;
  bool reading;    // EPOLLIN wanted (false while the other side has bytes waiting)
  bool eof;        // read() returned 0
  uint32_t mask;   // what epoll has now
  std::string out; // bytes for this descriptor that a write did not take
};

struct Tunnel {
  uint32_t id;
  Side c, b;
  // Written by the relay thread only, read by JavaScript (counts()).
  std::atomic<uint64_t> up{0}, down{0};
  int64_t lastClientMs;
  uint32_t silenceMs;
  bool silentTold = false;
  bool dead = false;
};

enum class Kind { kClosed, kSilent };

struct Event {
  Kind kind;
  uint32_t id;
  const char* side;  // closed: who ended it (client, backend, js); silent: "client"
  const char* why;   // eof, error, closed
  uint64_t up, down;
};

struct Relay {
  int ep = -1;
  int wake = -1;
  int tickMs = 1000;
  std::thread thread;
  napi_threadsafe_function tsfn = nullptr;
  std::mutex mu;  // guards tunnels, addQueue, closeQueue, stopping, nextId
  std::unordered_map<uint32_t, Tunnel*> tunnels;
  std::vector<Tunnel*> addQueue;  // adopted, registered with epoll by the relay thread
  std::vector<uint32_t> closeQueue;
  bool stopping = false;
  bool joined = false;
  uint32_t nextId = 1;
  char buf[kBufSize];
};

void Tell(Relay* r, Kind kind, Tunnel* t, const char* side, const char* why) {
  auto* e = new Event{kind, t->id, side, why, t->up.load(std::memory_order_relaxed), t->down.load(std::memory_order_relaxed)};
  if (napi_call_threadsafe_function(r->tsfn, e, napi_tsfn_nonblocking) != napi_ok) delete e;
}

void SetMask(Relay* r, Side& s) {
  uint32_t want = (s.reading ? uint32_t(EPOLLIN) : 0u) | (s.out.empty() ? 0u : uint32_t(EPOLLOUT));
  if (want == s.mask) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &s;
  epoll_ctl(r->ep, EPOLL_CTL_MOD, s.fd, &ev);
  s.mask = want;
}

// Ends a tunnel: both descriptors leave the epoll set before they are closed (a duplicate kept
// elsewhere would otherwise keep the registration alive), the memory is freed after the batch.
void Kill(Relay* r, Tunnel* t, const char* side, const char* why, bool tell, std::vector<Tunnel*>& graveyard) {
  if (t->dead) return;
  t->dead = true;
  for (Side* s : {&t->c, &t->b}) {
    epoll_ctl(r->ep, EPOLL_CTL_DEL, s->fd, nullptr);
    close(s->fd);
  }
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->tunnels.erase(t->id);
  }
  if (tell) Tell(r, Kind::kClosed, t, side, why);
  graveyard.push_back(t);
}

// Writes as much of `data` as `to` takes; keeps the rest in to.out. False on a write error.
bool Send(Side& to, const char* data, size_t n) {
  if (!to.out.empty()) {
    to.out.append(data, n);
    return true;
  }
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(to.fd, data + done, n - done);
    if (w > 0) {
      done += size_t(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      return false;
    }
  }
  if (done < n) to.out.assign(data + done, n - done);
  return true;
}

void OnReadable(Relay* r, Side& from, Side& to, std::vector<Tunnel*>& g) {
  Tunnel* t = from.t;
  ssize_t n = read(from.fd, r->buf, kBufSize);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return Kill(r, t, from.client ? "client" : "backend", "error", true, g);
  }
  if (n == 0) {
    from.eof = true;
    from.reading = false;
    // What this side sent before it closed still goes out; then the tunnel ends.
    if (to.out.empty()) return Kill(r, t, from.client ? "client" : "backend", "eof", true, g);
    return SetMask(r, from);
  }
  if (from.client) {
    t->up.store(t->up.load(std::memory_order_relaxed) + uint64_t(n), std::memory_order_relaxed);
    t->lastClientMs = NowMs();
    t->silentTold = false;
  } else {
    t->down.store(t->down.load(std::memory_order_relaxed) + uint64_t(n), std::memory_order_relaxed);
  }
  if (!Send(to, r->buf, size_t(n))) return Kill(r, t, to.client ? "client" : "backend", "error", true, g);
  if (!to.out.empty()) {
    from.reading = false;  // back-pressure: read again once `to` has taken its bytes
    SetMask(r, from);
    SetMask(r, to);
  }
}

void OnWritable(Relay* r, Side& to, Side& from, std::vector<Tunnel*>& g) {
  Tunnel* t = to.t;
  std::string pending;
  pending.swap(to.out);
  if (!Send(to, pending.data(), pending.size())) return Kill(r, t, to.client ? "client" : "backend", "error", true, g);
  if (!to.out.empty()) return;
  if (from.eof) return Kill(r, t, from.client ? "client" : "backend", "eof", true, g);
  from.reading = true;
  SetMask(r, to);
  SetMask(r, from);
}

void OnEvent(Relay* r, Side& s, uint32_t events, std::vector<Tunnel*>& g) {
  Tunnel* t = s.t;
  Side& other = s.client ? t->b : t->c;
  if (t->dead) return;
  if ((events & EPOLLOUT) && !s.out.empty()) OnWritable(r, s, other, g);
  if (t->dead) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && s.reading) {
    OnReadable(r, s, other, g);
  } else if (events & (EPOLLHUP | EPOLLERR)) {
    // Not reading this side (its peer is full) and it is gone: nothing more can be delivered.
    Kill(r, t, s.client ? "client" : "backend", "error", true, g);
  }
}

// Hands a new tunnel's two descriptors to epoll; a descriptor epoll refuses ends the tunnel.
void Register(Relay* r, Tunnel* t, std::vector<Tunnel*>& g) {
  if (t->dead) return;
  for (Side* s : {&t->c, &t->b}) {
    epoll_event ev{};
    s->mask = (s->reading ? uint32_t(EPOLLIN) : 0u) | (s->out.empty() ? 0u : uint32_t(EPOLLOUT));
    ev.events = s->mask;
    ev.data.ptr = s;
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, s->fd, &ev) != 0) return Kill(r, t, s->client ? "client" : "backend", "error", true, g);
  }
}

void SweepSilence(Relay* r) {
  int64_t now = NowMs();
  std::lock_guard<std::mutex> lock(r->mu);
  for (auto& [id, t] : r->tunnels) {
    if (t->silenceMs == 0 || t->silentTold || now - t->lastClientMs < int64_t(t->silenceMs)) continue;
    t->silentTold = true;
    Tell(r, Kind::kSilent, t, "client", "silent");
  }
}

void Loop(Relay* r) {
  epoll_event events[kMaxEvents];
  std::vector<Tunnel*> graveyard;
  int64_t nextSweep = NowMs() + r->tickMs;
  for (;;) {
    int n = epoll_wait(r->ep, events, kMaxEvents, r->tickMs);
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr == nullptr) {  // the wake-up eventfd: closes asked for, or stop
        uint64_t v;
        (void)!read(r->wake, &v, sizeof v);
        std::vector<uint32_t> ids;
        std::vector<Tunnel*> added;
        bool stop;
        {
          std::lock_guard<std::mutex> lock(r->mu);
          ids.swap(r->closeQueue);
          added.swap(r->addQueue);
          stop = r->stopping;
          if (stop)
            for (auto& [id, t] : r->tunnels) ids.push_back(id);
        }
        // Registered here, not by add(): only this thread may free a tunnel, and an event on one
        // side could end it before another thread had registered the other side.
        if (!stop)
          for (Tunnel* t : added) Register(r, t, graveyard);
        for (uint32_t id : ids) {
          Tunnel* t = nullptr;
          {
            std::lock_guard<std::mutex> lock(r->mu);
            auto it = r->tunnels.find(id);
            if (it != r->tunnels.end()) t = it->second;
          }
          if (t) Kill(r, t, "js", "closed", !stop, graveyard);
        }
        if (stop) {
          for (Tunnel* t : graveyard) delete t;
          return;
        }
        continue;
      }
      Side* s = static_cast<Side*>(events[i].data.ptr);
      OnEvent(r, *s, events[i].events, graveyard);
    }
    for (Tunnel* t : graveyard) delete t;
    graveyard.clear();
    int64_t now = NowMs();
    if (now >= nextSweep) {
      SweepSilence(r);
      nextSweep = now + r->tickMs;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// JavaScript side

void CallJs(napi_env env, napi_value cb, void*, void* data) {
  auto* e = static_cast<Event*>(data);
  if (env != nullptr && cb != nullptr) {
    napi_value argv[5], undef;
    napi_create_string_utf8(env, e->kind == Kind::kClosed ? "closed" : "silent", NAPI_AUTO_LENGTH, &argv[0]);
    napi_create_uint32(env, e->id, &argv[1]);
    napi_create_string_utf8(env, e->side, NAPI_AUTO_LENGTH, &argv[2]);
    napi_create_double(env, double(e->up), &argv[3]);
    napi_create_double(env, double(e->down), &argv[4]);
    napi_get_undefined(env, &undef);
    napi_call_function(env, undef, cb, 5, argv, nullptr);
  }
  delete e;
}

void StopThread(Relay* r) {
  if (r->joined) return;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->stopping = true;
  }
  uint64_t one = 1;
  (void)!write(r->wake, &one, sizeof one);
  r->thread.join();
  r->joined = true;
  close(r->ep);
  close(r->wake);
}

void Cleanup(void* arg) { StopThread(static_cast<Relay*>(arg)); }

napi_value Throw(napi_env env, const char* msg) {
  napi_throw_error(env, nullptr, msg);
  return nullptr;
}

Relay* Unwrap(napi_env env, napi_value v) {
  void* p = nullptr;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == nullptr) return nullptr;
  return static_cast<Relay*>(p);
}

void Finalize(napi_env env, void* data, void*) {
  auto* r = static_cast<Relay*>(data);
  if (!r->joined) {
    napi_remove_env_cleanup_hook(env, Cleanup, r);
    StopThread(r);
  }
  delete r;
}

// create(tickMs, onEvent) -> handle
napi_value Create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  int32_t tick = 0;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &tick) != napi_ok || tick < 10) return Throw(env, "create(tickMs >= 10, onEvent)");
  auto* r = new Relay();
  r->tickMs = tick;
  r->ep = epoll_create1(EPOLL_CLOEXEC);
  r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (r->ep < 0 || r->wake < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake, &ev) != 0) {
    if (r->ep >= 0) close(r->ep);
    if (r->wake >= 0) close(r->wake);
    delete r;
    return Throw(env, "epoll/eventfd failed");
  }
  napi_value name;
  napi_create_string_utf8(env, "native-relay", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[1], nullptr, name, 0, 1, nullptr, nullptr, nullptr, CallJs, &r->tsfn) != napi_ok) {
    close(r->ep);
    close(r->wake);
    delete r;
    return Throw(env, "onEvent must be a function");
  }
  // The relay does not keep the process alive by itself (its listener does, in a server).
  napi_unref_threadsafe_function(env, r->tsfn);
  r->thread = std::thread(Loop, r);
  pthread_setname_np(r->thread.native_handle(), "native-relay");  // how the test finds it in /proc
  napi_add_env_cleanup_hook(env, Cleanup, r);
  napi_value out;
  napi_create_external(env, r, Finalize, nullptr, &out);
  return out;
}

bool BufferArg(napi_env env, napi_value v, std::string& into) {
  bool is = false;
  napi_is_buffer(env, v, &is);
  if (!is) return false;
  void* data;
  size_t len;
  napi_get_buffer_info(env, v, &data, &len);
  into.assign(static_cast<const char*>(data), len);
  return true;
}

// add(handle, clientFd, backendFd, silenceMs, toBackend: Buffer, toClient: Buffer) -> id
// The relay works on duplicates: the caller still owns (and must close) clientFd and backendFd.
napi_value Add(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 6 ? Unwrap(env, argv[0]) : nullptr;
  int32_t cfd, bfd;
  uint32_t silence;
  std::string toB, toC;
  if (!r || napi_get_value_int32(env, argv[1], &cfd) != napi_ok || napi_get_value_int32(env, argv[2], &bfd) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &silence) != napi_ok || !BufferArg(env, argv[4], toB) || !BufferArg(env, argv[5], toC))
    return Throw(env, "add(handle, clientFd, backendFd, silenceMs, toBackend, toClient)");
  if (r->joined) return Throw(env, "relay stopped");
  int c = fcntl(cfd, F_DUPFD_CLOEXEC, 0);
  int b = c < 0 ? -1 : fcntl(bfd, F_DUPFD_CLOEXEC, 0);
  if (c < 0 || b < 0) {
    if (c >= 0) close(c);
    return Throw(env, "cannot duplicate the descriptors");
  }
  // Node's sockets are non-blocking already; the duplicates share that flag. Made sure anyway.
  for (int fd : {c, b}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto* t = new Tunnel();
  // A side is read only once the bytes handed over for the other side have been written.
  t->c = Side{t, c, true, toB.empty(), false, 0, std::move(toC)};
  t->b = Side{t, b, false, t->c.out.empty(), false, 0, std::move(toB)};
  t->silenceMs = silence;
  t->lastClientMs = NowMs();
  {
    std::lock_guard<std::mutex> lock(r->mu);
    t->id = r->nextId++;
    if (r->nextId == 0) r->nextId = 1;
    r->tunnels[t->id] = t;
  }
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->addQueue.push_back(t);
  }
  uint64_t one = 1;
  (void)!write(r->wake, &one, sizeof one);
  napi_value out;
  napi_create_uint32(env, t->id, &out);
  return out;
}

// close(handle, id) -> whether the tunnel was open; its "closed" event (side "js") follows.
napi_value CloseTunnel(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 2 ? Unwrap(env, argv[0]) : nullptr;
  uint32_t id;
  if (!r || napi_get_value_uint32(env, argv[1], &id) != napi_ok) return Throw(env, "close(handle, id)");
  bool found = false;
  if (!r->joined) {
    std::lock_guard<std::mutex> lock(r->mu);
    found = r->tunnels.count(id) > 0;
    if (found) r->closeQueue.push_back(id);
  }
  if (found) {
    uint64_t one = 1;
    (void)!write(r->wake, &one, sizeof one);
  }
  napi_value out;
  napi_get_boolean(env, found, &out);
  return out;
}

// counts(handle, id) -> [up, down] (client to backend, backend to client) or undefined once closed
napi_value Counts(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 2 ? Unwrap(env, argv[0]) : nullptr;
  uint32_t id;
  if (!r || napi_get_value_uint32(env, argv[1], &id) != napi_ok) return Throw(env, "counts(handle, id)");
  double up = -1, down = -1;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    auto it = r->tunnels.find(id);
    if (it != r->tunnels.end()) {
      up = double(it->second->up.load(std::memory_order_relaxed));
      down = double(it->second->down.load(std::memory_order_relaxed));
    }
  }
  napi_value out;
  if (up < 0) {
    napi_get_undefined(env, &out);
    return out;
  }
  napi_value u, d;
  napi_create_array_with_length(env, 2, &out);
  napi_create_double(env, up, &u);
  napi_create_double(env, down, &d);
  napi_set_element(env, out, 0, u);
  napi_set_element(env, out, 1, d);
  return out;
}

// size(handle) -> open tunnels
napi_value Size(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 1 ? Unwrap(env, argv[0]) : nullptr;
  if (!r) return Throw(env, "size(handle)");
  size_t n;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    n = r->tunnels.size();
  }
  napi_value out;
  napi_create_uint32(env, uint32_t(n), &out);
  return out;
}

// stop(handle): closes every tunnel (no events), joins the thread, releases the callback.
napi_value Stop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 1 ? Unwrap(env, argv[0]) : nullptr;
  if (!r) return Throw(env, "stop(handle)");
  if (!r->joined) {
    napi_remove_env_cleanup_hook(env, Cleanup, r);
    StopThread(r);
    napi_release_threadsafe_function(r->tsfn, napi_tsfn_abort);
  }
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"create", nullptr, Create, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"add", nullptr, Add, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"close", nullptr, CloseTunnel, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"counts", nullptr, Counts, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"size", nullptr, Size, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"stop", nullptr, Stop, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
