// roomgate's native relay: moves the bytes of open plain-TCP WebSocket tunnels in one thread of
// its own (src/proxy/native-relay.ts is its JavaScript side; docs/architecture.md, "The
// native relay").
//
// One thread owns an epoll set and relays between the two descriptors of each tunnel through a
// fixed 64 KB buffer: read, then write to the other side; only what a write does not take is kept
// for that tunnel, and reading its source stops until it is written (the back-pressure a pipe
// gives). JavaScript keeps control: it adds a tunnel, closes one, reads its byte counts, and is
// told, through a thread-safe function, when and why one ended. The relay keeps the tunnel
// contract of the JavaScript relay (src/proxy/upgrade-tunnel.ts): a side that ends (FIN) has its
// bytes delivered, then the other side is ended too and gets a linger to finish; the client's
// silence, a tunnel's idleness and a client that takes no write each close it after their limits.
//
// Descriptors: the client's is borrowed (JavaScript's socket keeps it open, so the listener's
// connection count and limits still see the connection, and closes it only after this relay said
// `closed`: a descriptor number closed early could be reused by a new connection while the relay
// still uses it); the backend's is a duplicate the relay owns (JavaScript destroys its socket at
// once). Two descriptors per tunnel, as on the JavaScript relay.
//
// Why not splice(2): it moves bytes through a pipe, 2 more descriptors per direction, and for
// frames of a few hundred bytes it costs the same 2 system calls per chunk as read + write.
#include <node_api.h>
#include <uv.h>

#include "probe.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
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

// Where one WebSocket message ends and the next begins in one direction (RFC 6455 5.2), followed
// from the first frame on by reading each frame's header and skipping its payload: the same
// follower as src/proxy/message-boundaries.ts, so a tunnel a handoff may hold can be handed back
// to JavaScript between two messages. What it does not check (reserved bits, opcodes) is the
// endpoints' to refuse; a length no peer may send (2^53 or more) gives up (`broken`).
struct Follow {
  uint8_t h[14];
  uint8_t headerSeen = 0;
  uint64_t payloadLeft = 0;
  bool inMessage = false;
  bool endsMessage = false;
  bool broken = false;
  bool closeSeen = false;

  bool AtBoundary() const { return headerSeen == 0 && payloadLeft == 0 && !inMessage; }
  static size_t HeaderLen(uint8_t b1) {
    size_t len = b1 & 0x7f;
    return 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) + ((b1 & 0x80) ? 4 : 0);
  }
  void FrameDone() {
    if (endsMessage) inMessage = false;
    endsMessage = false;
  }
  void Start(const uint8_t* p) {
    bool fin = (p[0] & 0x80) != 0;
    int op = p[0] & 0x0f;
    uint64_t len = p[1] & 0x7f;
    if (len == 126) {
      len = (uint64_t(p[2]) << 8) | p[3];
    } else if (len == 127) {
      len = 0;
      for (int i = 2; i < 10; i++) len = (len << 8) | p[i];
      if (len >= (uint64_t(1) << 53)) {
        broken = true;
        return;
      }
    }
    if (op < 8) {
      inMessage = true;
      endsMessage = fin;
    } else {
      endsMessage = false;
      if (op == 8) closeSeen = true;
    }
    payloadLeft = len;
    if (len == 0) FrameDone();
  }
  // Follows buf[from, to). With `stop`: the offset of the first boundary reached after consuming at
  // least one byte (what follows is not consumed), else -1 having consumed it all.
  long Run(const uint8_t* buf, size_t from, size_t to, bool stop) {
    if (broken) return -1;
    size_t i = from;
    while (i < to) {
      if (payloadLeft > 0) {
        uint64_t skip = std::min<uint64_t>(payloadLeft, to - i);
        payloadLeft -= skip;
        i += size_t(skip);
        if (payloadLeft == 0) FrameDone();
      } else if (headerSeen == 0 && to - i >= 2 && to - i >= HeaderLen(buf[i + 1])) {
        size_t len = HeaderLen(buf[i + 1]);
        Start(buf + i);
        i += len;
      } else {
        while (i < to && (headerSeen < 2 || headerSeen < HeaderLen(h[1]))) h[headerSeen++] = buf[i++];
        if (headerSeen >= 2 && headerSeen == HeaderLen(h[1])) {
          Start(h);
          headerSeen = 0;
        }
      }
      if (broken) return -1;
      if (stop && AtBoundary()) return long(i);
    }
    return -1;
  }
};

// One descriptor of a tunnel; epoll's data.ptr points here.
struct Side {
  Tunnel* t = nullptr;
  int fd = -1;
  bool client = false;
  bool owned = false;    // the relay closes it (the backend's duplicate); the client's is borrowed
  bool reading = true;   // EPOLLIN wanted (false while the other side has bytes waiting, or after eof)
  bool eof = false;      // read() returned 0: this peer sent its FIN
  bool shut = false;     // this side's writing was shut (its peer got a FIN from the relay)
  bool stopped = false;  // released: this side is read no more (its stream stopped at a message boundary)
  Follow f;              // the messages of the stream this side sends (followed tunnels only)
  std::string past;      // released: bytes this side sent past the boundary, not relayed
  uint32_t mask = 0;     // what epoll has now
  std::string out;       // bytes for this descriptor that a write did not take
};

struct Limits {
  uint32_t silenceMs;       // no client byte for this long: closed ("silent"); 0 = never
  uint32_t idleMs;          // no byte either way for this long: closed ("idle"); 0 = never
  uint32_t writeTimeoutMs;  // bytes for the client not taken for this long: closed ("write-timeout"); 0 = never
  uint32_t lingerMs;        // after one side ended, the other's time to finish
};

struct Tunnel;
// The tunnels by the earliest moment one of their limits could pass (relay thread only): the sweep
// looks at those due, not at every tunnel every tick.
using Schedule = std::multimap<int64_t, Tunnel*>;

struct Tunnel {
  uint32_t id = 0;
  Side c, b;
  Limits lim{};
  // Written by the relay thread only, read by JavaScript (counts()).
  std::atomic<uint64_t> up{0}, down{0};
  int64_t lastClientMs = 0;  // the client's last byte
  int64_t lastActiveMs = 0;  // the last byte either way
  int64_t stallSinceMs = 0;  // bytes wait for the client since (0: none wait), reset by progress
  int64_t halfSinceMs = 0;   // one side ended at (0: neither)
  const char* endedBy = nullptr;  // "client-eof" or "backend-eof": who ended first
  bool follow = false;      // its messages are followed both ways (a handoff may hold it)
  bool releasing = false;   // JavaScript asked for it back: each direction stops at its next boundary
  bool dead = false;
  // Its place in the relay's schedule: no limit can pass before checkAt (relay thread only).
  bool scheduled = false;
  int64_t checkAt = 0;
  Schedule::iterator due;
};

struct Event {
  uint32_t id;
  const char* reason;  // why it ended, or "released"
  uint64_t up, down;
  // "released" only: what JavaScript takes over with the two descriptors.
  std::string owedBackend, owedClient, pastClient, pastBackend;
  uint32_t flags = 0;  // 1: client stream broken, 2: client sent a close, 4: backend stream broken, 8: backend sent a close
};

struct Relay {
  int ep = -1;
  int wake = -1;
  int tickMs = 1000;
  std::thread thread;
  napi_threadsafe_function tsfn = nullptr;
  std::mutex mu;  // guards tunnels, addQueue, closeQueue, stopping, nextId
  std::unordered_map<uint32_t, Tunnel*> tunnels;
  std::vector<Tunnel*> addQueue;  // added, registered with epoll by the relay thread
  std::vector<uint32_t> closeQueue;
  std::vector<uint32_t> releaseQueue;
  bool stopping = false;
  bool joined = false;
  uint32_t nextId = 1;
  Schedule schedule;  // relay thread only
  char buf[kBufSize];
};

const char* SideName(const Side& s, const char* ifClient, const char* ifBackend) { return s.client ? ifClient : ifBackend; }

void Post(Relay* r, Event* e) {
  if (napi_call_threadsafe_function(r->tsfn, e, napi_tsfn_nonblocking) != napi_ok) delete e;
}

// Wakes the relay thread: something was queued for it (a tunnel, a close, a release) or it is to stop.
void Wake(Relay* r) {
  uint64_t one = 1;
  (void)!write(r->wake, &one, sizeof one);
}

// The open tunnel with this id, or null. Relay thread: the pointer stays valid until it frees it.
Tunnel* Find(Relay* r, uint32_t id) {
  std::lock_guard<std::mutex> lock(r->mu);
  auto it = r->tunnels.find(id);
  return it == r->tunnels.end() ? nullptr : it->second;
}

void Tell(Relay* r, Tunnel* t, const char* reason) {
  auto* e = new Event{t->id, reason, t->up.load(std::memory_order_relaxed), t->down.load(std::memory_order_relaxed)};
  Post(r, e);
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

void Unschedule(Relay* r, Tunnel* t);
void Reschedule(Relay* r, Tunnel* t, int64_t now);

// Ends a tunnel: both descriptors leave the epoll set, the owned one is closed (the borrowed
// client descriptor is JavaScript's to close, once told); the memory is freed after the batch.
void Kill(Relay* r, Tunnel* t, const char* reason, bool tell, std::vector<Tunnel*>& graveyard) {
  if (t->dead) return;
  t->dead = true;
  Unschedule(r, t);
  for (Side* s : {&t->c, &t->b}) {
    epoll_ctl(r->ep, EPOLL_CTL_DEL, s->fd, nullptr);
    if (s->owned) close(s->fd);
  }
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->tunnels.erase(t->id);
  }
  if (tell) Tell(r, t, reason);
  graveyard.push_back(t);
}

// Both directions stopped at a boundary: the tunnel goes back to JavaScript with both descriptors
// (lent: nothing is closed), what each side is still owed and what each sent past its boundary.
void Release(Relay* r, Tunnel* t, std::vector<Tunnel*>& graveyard) {
  t->dead = true;
  Unschedule(r, t);
  for (Side* s : {&t->c, &t->b}) epoll_ctl(r->ep, EPOLL_CTL_DEL, s->fd, nullptr);
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->tunnels.erase(t->id);
  }
  auto* e = new Event{t->id, "released", t->up.load(std::memory_order_relaxed), t->down.load(std::memory_order_relaxed)};
  e->owedBackend.swap(t->b.out);
  e->owedClient.swap(t->c.out);
  e->pastClient.swap(t->c.past);
  e->pastBackend.swap(t->b.past);
  e->flags = (t->c.f.broken ? 1u : 0u) | (t->c.f.closeSeen ? 2u : 0u) | (t->b.f.broken ? 4u : 0u) | (t->b.f.closeSeen ? 8u : 0u);
  Post(r, e);
  graveyard.push_back(t);
}

void SetMask(Relay* r, Side& s);

// A releasing tunnel's side whose stream is between two messages (or cannot be followed) is read no
// more; once both are, the tunnel is released. A tunnel with a side ended is not: it is ending.
void TryRelease(Relay* r, Tunnel* t, std::vector<Tunnel*>& g) {
  if (!t->releasing || t->dead || t->halfSinceMs != 0) return;
  for (Side* s : {&t->c, &t->b}) {
    if (s->stopped || !(s->f.AtBoundary() || s->f.broken)) continue;
    s->stopped = true;
    s->reading = false;
    SetMask(r, *s);
  }
  if (t->c.stopped && t->b.stopped) Release(r, t, g);
}

bool Send(Side& to, const char* data, size_t n, size_t* wrote);

// A side ended while its tunnel waited to be released: the tunnel is ending, not going back. The
// stopped sides read again, and what they sent past their boundary is relayed first.
void AbandonRelease(Relay* r, Tunnel* t) {
  if (!t->releasing) return;
  t->releasing = false;
  for (Side* s : {&t->c, &t->b}) {
    if (!s->stopped) continue;
    Side& to = s->client ? t->b : t->c;
    s->stopped = false;
    size_t wrote;
    if (!s->past.empty()) (void)Send(to, s->past.data(), s->past.size(), &wrote);  // a failed write shows as the next event's error
    s->past.clear();
    s->reading = !s->eof && to.out.empty();
    SetMask(r, *s);
    SetMask(r, to);
  }
}

// Writes as much of `data` as `to` takes; keeps the rest in to.out. False on a write error.
bool Send(Side& to, const char* data, size_t n, size_t* wrote) {
  *wrote = 0;
  if (!to.out.empty()) {
    to.out.append(data, n);
    return true;
  }
  size_t done = 0;
  while (done < n) {
    ssize_t w = send(to.fd, data + done, n - done, MSG_NOSIGNAL);
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
  *wrote = done;
  if (done < n) to.out.assign(data + done, n - done);
  return true;
}

// The client's queue changed: a stall is timed from the last write that made no way into it.
void NoteClientQueue(Tunnel* t, Side& to, bool progressed, int64_t now) {
  if (!to.client) return;
  if (to.out.empty()) {
    t->stallSinceMs = 0;
  } else if (progressed || t->stallSinceMs == 0) {
    t->stallSinceMs = now;
  }
}

// Both peers ended and every byte was delivered: the tunnel is over.
// So is one whose backend ended first, once the client has every byte and its FIN: as on the
// JavaScript relay, the backend's end ends the tunnel, and the client's linger is JavaScript's.
bool Done(Relay* r, Tunnel* t, std::vector<Tunnel*>& g) {
  bool both = t->c.eof && t->b.eof && t->c.out.empty() && t->b.out.empty();
  bool backendLeft = t->b.eof && t->c.out.empty() && t->c.shut && t->endedBy != nullptr && std::strcmp(t->endedBy, "backend-eof") == 0;
  if (!both && !backendLeft) return false;
  Kill(r, t, t->endedBy ? t->endedBy : "client-eof", true, g);
  return true;
}

// `to`'s peer gets a FIN once what was queued for it is written (its source ended).
void ShutWrite(Tunnel* t, Side& to) {
  if (to.shut) return;
  to.shut = true;
  shutdown(to.fd, SHUT_WR);
  if (t->halfSinceMs == 0) t->halfSinceMs = NowMs();
}

void OnReadable(Relay* r, Side& from, Side& to, std::vector<Tunnel*>& g) {
  Tunnel* t = from.t;
  ssize_t n = read(from.fd, r->buf, kBufSize);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return Kill(r, t, SideName(from, "client-error", "backend-error"), true, g);
  }
  int64_t now = NowMs();
  if (n == 0) {
    AbandonRelease(r, t);
    from.eof = true;
    from.reading = false;
    if (t->endedBy == nullptr) t->endedBy = SideName(from, "client-eof", "backend-eof");
    if (t->halfSinceMs == 0) t->halfSinceMs = now;
    SetMask(r, from);
    // What this side sent before its FIN still goes out, then the other side gets one.
    if (to.out.empty()) ShutWrite(t, to);
    Done(r, t, g);
    return;
  }
  t->lastActiveMs = now;
  if (from.client) {
    t->up.store(t->up.load(std::memory_order_relaxed) + uint64_t(n), std::memory_order_relaxed);
    t->lastClientMs = now;
  } else {
    t->down.store(t->down.load(std::memory_order_relaxed) + uint64_t(n), std::memory_order_relaxed);
  }
  size_t relay = size_t(n);
  if (t->follow) {
    long at = from.f.Run(reinterpret_cast<const uint8_t*>(r->buf), 0, size_t(n), t->releasing);
    if (at >= 0) {
      // Released at this boundary: the rest is JavaScript's to relay (or to hold).
      relay = size_t(at);
      from.past.assign(r->buf + at, size_t(n) - size_t(at));
    }
  }
  size_t wrote;
  if (relay > 0 && !Send(to, r->buf, relay, &wrote)) return Kill(r, t, SideName(to, "client-error", "backend-error"), true, g);
  if (t->releasing) {
    TryRelease(r, t, g);
    if (t->dead) return;
  }
  if (!to.out.empty()) {
    NoteClientQueue(t, to, false, now);
    from.reading = false;  // back-pressure: read again once `to` has taken its bytes
    SetMask(r, from);
    SetMask(r, to);
  }
}

void OnWritable(Relay* r, Side& to, Side& from, std::vector<Tunnel*>& g) {
  Tunnel* t = to.t;
  std::string pending;
  pending.swap(to.out);
  size_t wrote;
  if (!Send(to, pending.data(), pending.size(), &wrote)) return Kill(r, t, SideName(to, "client-error", "backend-error"), true, g);
  int64_t now = NowMs();
  if (wrote > 0) t->lastActiveMs = now;
  NoteClientQueue(t, to, wrote > 0, now);
  if (!to.out.empty()) return;
  if (from.eof) {
    ShutWrite(t, to);
    SetMask(r, to);
    Done(r, t, g);
    return;
  }
  from.reading = !from.stopped;
  SetMask(r, to);
  SetMask(r, from);
}

void OnEvent(Relay* r, Side& s, uint32_t events, std::vector<Tunnel*>& g) {
  Tunnel* t = s.t;
  Side& other = s.client ? t->b : t->c;
  if (t->dead) return;
  if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !s.out.empty()) OnWritable(r, s, other, g);
  if (t->dead) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && s.reading) {
    OnReadable(r, s, other, g);
  } else if (events & (EPOLLHUP | EPOLLERR)) {
    // Not read now (its peer is full, or it ended) and gone: HUP is reported whatever the mask,
    // so the tunnel ends here, cleanly when everything was delivered.
    if (!Done(r, t, g)) Kill(r, t, SideName(s, "client-error", "backend-error"), true, g);
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
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
      // The one registered already leaves the set again (Kill deletes both; a failed delete is harmless).
      return Kill(r, t, SideName(*s, "client-error", "backend-error"), true, g);
    }
  }
  // In the schedule once in the epoll set: the sweep leaves a tunnel still queued alone.
  Reschedule(r, t, NowMs());
}

// The earliest moment one of the tunnel's limits could pass, as things stand (INT64_MAX: none).
// Bytes only move these later; a side ending (the linger) or bytes starting to wait for the client
// (the write timeout) can bring one nearer, which Reschedule() after each event catches.
int64_t NextLimit(const Tunnel* t) {
  const Limits& l = t->lim;
  int64_t at = INT64_MAX;
  if (t->halfSinceMs != 0) at = std::min(at, t->halfSinceMs + int64_t(l.lingerMs));
  if (l.writeTimeoutMs != 0 && t->stallSinceMs != 0) at = std::min(at, t->stallSinceMs + int64_t(l.writeTimeoutMs));
  if (l.idleMs != 0) at = std::min(at, t->lastActiveMs + int64_t(l.idleMs));
  if (l.silenceMs != 0 && t->halfSinceMs == 0) at = std::min(at, t->lastClientMs + int64_t(l.silenceMs));
  return at;
}

void Unschedule(Relay* r, Tunnel* t) {
  if (!t->scheduled) return;
  r->schedule.erase(t->due);
  t->scheduled = false;
}

// Moves the tunnel nearer in the schedule when a limit could now pass sooner than where it is;
// never later (a check that comes early finds nothing and places it again). After `now` always,
// so a sweep never meets the same tunnel twice.
void Reschedule(Relay* r, Tunnel* t, int64_t now) {
  int64_t at = NextLimit(t);
  if (at == INT64_MAX) return Unschedule(r, t);
  at = std::max(at, now + 1);
  if (t->scheduled) {
    if (at >= t->checkAt) return;
    r->schedule.erase(t->due);
  }
  t->due = r->schedule.emplace(at, t);
  t->checkAt = at;
  t->scheduled = true;
}

// Why the tunnel ends now, or null. The rules of the limits, in their order.
const char* Expired(Tunnel* t, int64_t now) {
  const Limits& l = t->lim;
  if (t->halfSinceMs != 0 && now - t->halfSinceMs >= int64_t(l.lingerMs)) return t->endedBy ? t->endedBy : "client-eof";
  if (l.writeTimeoutMs != 0 && t->stallSinceMs != 0 && now - t->stallSinceMs >= int64_t(l.writeTimeoutMs)) return "write-timeout";
  if (l.idleMs != 0 && now - t->lastActiveMs >= int64_t(l.idleMs)) return "idle";
  if (l.silenceMs != 0 && t->halfSinceMs == 0 && now - t->lastClientMs >= int64_t(l.silenceMs)) {
    // A client not read because its backend has not taken what it sent is not silent: it is
    // looked at again after another limit (as on the JavaScript relay).
    if (!t->c.reading) {
      t->lastClientMs = now;
      return nullptr;
    }
    return "silent";
  }
  return nullptr;
}

// The limits, looked at every tick (their precision), of the tunnels due. Relay thread only: the
// schedule and the tunnels' clocks are its own, so no lock is taken. 8,750 idle tunnels were all
// looked at every second before (5% of the relay thread's time idle); now each once per limit.
void Sweep(Relay* r, std::vector<Tunnel*>& g) {
  int64_t now = NowMs();
  std::vector<std::pair<Tunnel*, const char*>> ends;
  while (!r->schedule.empty() && r->schedule.begin()->first <= now) {
    Tunnel* t = r->schedule.begin()->second;
    r->schedule.erase(r->schedule.begin());
    t->scheduled = false;
    const char* why = Expired(t, now);
    if (why != nullptr) {
      ends.emplace_back(t, why);
    } else {
      Reschedule(r, t, now);
    }
  }
  for (auto& [t, reason] : ends) Kill(r, t, reason, true, g);
}

void Loop(Relay* r) {
  epoll_event events[kMaxEvents];
  std::vector<Tunnel*> graveyard;
  int64_t nextSweep = NowMs() + r->tickMs;
  for (;;) {
    int n = epoll_wait(r->ep, events, kMaxEvents, r->tickMs);
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr == nullptr) {  // the wake-up eventfd: adds, closes, or stop
        uint64_t v;
        (void)!read(r->wake, &v, sizeof v);
        std::vector<uint32_t> ids;
        std::vector<Tunnel*> added;
        std::vector<uint32_t> releases;
        bool stop;
        {
          std::lock_guard<std::mutex> lock(r->mu);
          ids.swap(r->closeQueue);
          added.swap(r->addQueue);
          releases.swap(r->releaseQueue);
          stop = r->stopping;
          if (stop)
            for (auto& [id, t] : r->tunnels) ids.push_back(id);
        }
        // Registered here, not by add(): only this thread may free a tunnel, and an event on one
        // side could end it before another thread had registered the other side.
        if (!stop)
          for (Tunnel* t : added) Register(r, t, graveyard);
        for (uint32_t id : ids) {
          Tunnel* t = Find(r, id);
          if (t) Kill(r, t, "closed", !stop, graveyard);
        }
        for (uint32_t id : releases) {
          Tunnel* t = Find(r, id);
          if (t == nullptr || !t->follow || stop) continue;
          t->releasing = true;
          TryRelease(r, t, graveyard);
        }
        if (stop) {
          for (Tunnel* t : graveyard) delete t;
          return;
        }
        continue;
      }
      Side* s = static_cast<Side*>(events[i].data.ptr);
      Tunnel* t = s->t;
      OnEvent(r, *s, events[i].events, graveyard);
      if (!t->dead) Reschedule(r, t, NowMs());
    }
    int64_t now = NowMs();
    if (now >= nextSweep) {
      Sweep(r, graveyard);
      nextSweep = now + r->tickMs;
    }
    for (Tunnel* t : graveyard) delete t;
    graveyard.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// JavaScript side

void CallJs(napi_env env, napi_value cb, void*, void* data) {
  auto* e = static_cast<Event*>(data);
  if (env != nullptr && cb != nullptr) {
    napi_value argv[9], undef;
    napi_get_undefined(env, &undef);
    napi_create_uint32(env, e->id, &argv[0]);
    napi_create_string_utf8(env, e->reason, NAPI_AUTO_LENGTH, &argv[1]);
    napi_create_double(env, double(e->up), &argv[2]);
    napi_create_double(env, double(e->down), &argv[3]);
    const std::string* bufs[4] = {&e->owedBackend, &e->owedClient, &e->pastClient, &e->pastBackend};
    for (int i = 0; i < 4; i++) {
      if (bufs[i]->empty()) {
        argv[4 + i] = undef;
      } else {
        void* copy;
        napi_create_buffer_copy(env, bufs[i]->size(), bufs[i]->data(), &copy, &argv[4 + i]);
      }
    }
    napi_create_uint32(env, e->flags, &argv[8]);
    napi_call_function(env, undef, cb, 9, argv, nullptr);
  }
  delete e;
}

void StopThread(Relay* r) {
  if (r->joined) return;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->stopping = true;
  }
  Wake(r);
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

// create(tickMs, onEvent(id, reason, up, down, owedBackend, owedClient, pastClient, pastBackend, flags)) -> handle
napi_value Create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  int32_t tick = 0;
  napi_valuetype cbType = napi_undefined;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &tick) != napi_ok || tick < 10 || tick > 60000) return Throw(env, "create(tickMs 10..60000, onEvent)");
  if (napi_typeof(env, argv[1], &cbType) != napi_ok || cbType != napi_function) return Throw(env, "onEvent must be a function");
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
  napi_create_string_utf8(env, "roomgate-relay", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[1], nullptr, name, 0, 1, nullptr, nullptr, nullptr, CallJs, &r->tsfn) != napi_ok) {
    close(r->ep);
    close(r->wake);
    delete r;
    return Throw(env, "cannot make the event callback");
  }
  // The relay does not keep the process alive by itself (the sockets' listener does).
  napi_unref_threadsafe_function(env, r->tsfn);
  r->thread = std::thread(Loop, r);
  pthread_setname_np(r->thread.native_handle(), "roomgate-relay");
  napi_add_env_cleanup_hook(env, Cleanup, r);
  napi_value out;
  napi_create_external(env, r, Finalize, nullptr, &out);
  return out;
}

bool BufferArg(napi_env env, napi_value v, std::string& into) {
  bool is = false;
  if (napi_is_buffer(env, v, &is) != napi_ok || !is) return false;
  void* data;
  size_t len;
  napi_get_buffer_info(env, v, &data, &len);
  into.assign(static_cast<const char*>(data), len);
  return true;
}

bool U32Arg(napi_env env, napi_value v, uint32_t* out) { return napi_get_value_uint32(env, v, out) == napi_ok; }

// Takes a lent descriptor out of libuv's own epoll set. Stopping a read does not: libuv leaves a
// descriptor it no longer watches registered and takes it out only when an event comes for it, so
// every tunnel's first byte after the hand-over would wake the JavaScript thread once for nothing
// (8,750 idle tunnels: ~90 wake-ups a second of the main thread through the bench's idle window).
// Only when libuv watches it no more (its watcher slot empty: no read, no write pending); its
// watcher then registers it anew (EPOLL_CTL_ADD) if JavaScript reads it again after a release,
// and closing it later takes it out of a set it is no longer in, which libuv allows.
void LeaveLoopPoll(napi_env env, int fd) {
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) return;
  if (unsigned(fd) < loop->nwatchers && loop->watchers[fd] != nullptr) return;
  epoll_event ev{};
  (void)epoll_ctl(uv_backend_fd(loop), EPOLL_CTL_DEL, fd, &ev);
}

// add(handle, clientFd, backendFd, silenceMs, idleMs, writeTimeoutMs, lingerMs, toBackend, toClient, follow) -> id
// clientFd is borrowed: the caller keeps it open until this tunnel's `closed` (or `released`)
// event. backendFd is duplicated (the caller closes its own at once), except with `follow`: then
// it is borrowed too, the tunnel's messages are followed both ways, and release() hands it back.
napi_value Add(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 10 ? Unwrap(env, argv[0]) : nullptr;
  bool follow = false;
  int32_t cfd = -1, bfd = -1;
  Limits lim{};
  std::string toB, toC;
  if (!r || napi_get_value_int32(env, argv[1], &cfd) != napi_ok || napi_get_value_int32(env, argv[2], &bfd) != napi_ok || cfd < 0 || bfd < 0 ||
      !U32Arg(env, argv[3], &lim.silenceMs) || !U32Arg(env, argv[4], &lim.idleMs) || !U32Arg(env, argv[5], &lim.writeTimeoutMs) ||
      !U32Arg(env, argv[6], &lim.lingerMs) || !BufferArg(env, argv[7], toB) || !BufferArg(env, argv[8], toC) ||
      napi_get_value_bool(env, argv[9], &follow) != napi_ok)
    return Throw(env, "add(handle, clientFd, backendFd, silenceMs, idleMs, writeTimeoutMs, lingerMs, toBackend, toClient, follow)");
  if (r->joined) return Throw(env, "relay stopped");
  LeaveLoopPoll(env, cfd);
  if (follow) LeaveLoopPoll(env, bfd);
  int b = follow ? bfd : fcntl(bfd, F_DUPFD_CLOEXEC, 0);
  if (b < 0) return Throw(env, "cannot duplicate the backend descriptor");
  // Node's sockets are non-blocking already (the client's flag is shared with it); made sure anyway.
  for (int fd : {cfd, b}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto* t = new Tunnel();
  t->c.t = t;
  t->c.fd = cfd;
  t->c.client = true;
  t->c.out = std::move(toC);
  t->b.t = t;
  t->b.fd = b;
  t->b.owned = !follow;
  t->follow = follow;
  t->b.out = std::move(toB);
  // A side is read only once the bytes handed over for the other side have been written.
  t->c.reading = t->b.out.empty();
  t->b.reading = t->c.out.empty();
  t->lim = lim;
  t->lastClientMs = t->lastActiveMs = NowMs();
  if (!t->c.out.empty()) t->stallSinceMs = t->lastActiveMs;
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    id = t->id = r->nextId++;
    if (r->nextId == 0) r->nextId = 1;
    r->tunnels[id] = t;
    r->addQueue.push_back(t);
  }
  // From the wake-up on, the relay thread may end and free the tunnel (a client already gone):
  // only the id taken under the lock is read after it.
  Wake(r);
  napi_value out;
  napi_create_uint32(env, id, &out);
  return out;
}

// Queues `id` on one of the relay thread's queues (closes, releases) when it is an open tunnel
// (and, with `followedOnly`, a followed one), and wakes the thread. Whether it was queued.
napi_value QueueOp(napi_env env, napi_callback_info info, const char* usage, std::vector<uint32_t> Relay::*queue, bool followedOnly) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 2 ? Unwrap(env, argv[0]) : nullptr;
  uint32_t id;
  if (!r || !U32Arg(env, argv[1], &id)) return Throw(env, usage);
  bool found = false;
  if (!r->joined) {
    std::lock_guard<std::mutex> lock(r->mu);
    auto it = r->tunnels.find(id);
    found = it != r->tunnels.end() && (!followedOnly || it->second->follow);
    if (found) (r->*queue).push_back(id);
  }
  if (found) Wake(r);
  napi_value out;
  napi_get_boolean(env, found, &out);
  return out;
}

// close(handle, id) -> whether the tunnel was open; its `closed` event (reason "closed") follows,
// after which the client descriptor may be closed.
napi_value CloseTunnel(napi_env env, napi_callback_info info) { return QueueOp(env, info, "close(handle, id)", &Relay::closeQueue, false); }

// release(handle, id) -> whether the tunnel is open and followed; its `released` event follows once
// both directions reached a message boundary (or it ends first: then `closed`).
napi_value ReleaseTunnel(napi_env env, napi_callback_info info) { return QueueOp(env, info, "release(handle, id)", &Relay::releaseQueue, true); }

// counts(handle, id) -> [up, down] (client to backend, backend to client) or undefined once closed
napi_value Counts(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Relay* r = argc == 2 ? Unwrap(env, argv[0]) : nullptr;
  uint32_t id;
  if (!r || !U32Arg(env, argv[1], &id)) return Throw(env, "counts(handle, id)");
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

// stop(handle): ends every tunnel (no events), joins the thread and releases the callback. Once
// it returns, the caller may close every client descriptor it lent.
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
      {"release", nullptr, ReleaseTunnel, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"counts", nullptr, Counts, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"size", nullptr, Size, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"stop", nullptr, Stop, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  roomgate::DefineProbe(env, exports);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
