// The connection of one health check, on Node's own event loop but driven from C++
// (src/backends/probe-link.ts is its JavaScript side; docs/architecture.md, "The native relay",
// "The health checks use the addon too").
//
// Why: a check runs once per backend every couple of seconds, so its JavaScript never leaves V8's
// first tiers, and a net.Socket's construction, connect, stream and destroy machinery cost about
// half a millisecond of CPU per check: with the relay moving the bytes of idle tunnels in its own
// thread, that was most of what an idle gateway's JavaScript thread still did. Here a check is one
// libuv TCP handle: connect, write the fixed request, and hand each chunk read to JavaScript, then
// the backend's end or an error. Nothing of HTTP is read here: JavaScript judges the answer with
// the same strict reader whichever connection brought it, and closes the probe once it has its
// verdict or its timeout passes. Plain connections to an address only (TLS and host names stay on
// Node's sockets).
//
// Events, in the order they can come (none after probeClose):
//   0 connected          only for a probe with no request (a connect check)
//   1 data, Buffer       a chunk of the answer (a copy: JavaScript may keep it)
//   2 end                the backend ended its side (reading stops)
//   3 error, "ECODE"     libuv's name of the error (connect, write or read; reading stops)
#include "probe.h"

#include <uv.h>

#include <string>

namespace roomgate {
namespace {

constexpr size_t kReadSize = 16 * 1024;
enum Event { kConnected = 0, kData = 1, kEnd = 2, kError = 3 };

struct Probe {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  napi_env env = nullptr;
  napi_ref onEvent = nullptr;
  // Registered while the handle is open: an environment that ends (a worker thread terminated)
  // waits for the handle's close before its addon is unloaded, so OnClosed never runs in code no
  // longer mapped.
  napi_async_cleanup_hook_handle cleanup = nullptr;
  std::string request;
  // Freed once both are true: libuv is done with the handle, and JavaScript's handle (an external)
  // was collected.
  bool closed = false;
  bool collected = false;
  // uv_close asked: no event from then on.
  bool closing = false;
  char buf[kReadSize];
};

void FreeIfDone(Probe* p) {
  if (p->closed && p->collected) delete p;
}

// No Node-API call here: the loop may run a close callback after Node-API's environment is gone
// (a process exiting: its externals are collected, so their probes closed, before the last turns
// of the loop).
void OnClosed(uv_handle_t* h) {
  auto* p = static_cast<Probe*>(h->data);
  p->closed = true;
  // Takes the handle only (no environment): the environment's end, if it waits, may go on now.
  if (p->cleanup != nullptr) napi_remove_async_cleanup_hook(p->cleanup);
  p->cleanup = nullptr;
  FreeIfDone(p);
}

// On the JavaScript thread (probeClose, or the handle's collection): the callback is let go at
// once, since no event is delivered after this.
void StartClose(Probe* p) {
  if (p->closing) return;
  p->closing = true;
  napi_delete_reference(p->env, p->onEvent);
  p->onEvent = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&p->tcp), OnClosed);
}

// Calls JavaScript's onEvent(kind[, arg]) as a callback from the loop (microtasks and next ticks
// run after it). An exception it throws is the process's uncaught exception, as one from a
// socket's listener is. No async context: nothing in roomgate follows one through a check.
void Emit(Probe* p, Event kind, const char* data, size_t len) {
  if (p->closing) return;
  napi_env env = p->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, recv, argv[2];
  size_t argc = 1;
  napi_get_reference_value(env, p->onEvent, &cb);
  napi_get_global(env, &recv);  // napi_make_callback wants an object
  napi_create_int32(env, kind, &argv[0]);
  if (kind == kData) {
    void* copy;
    napi_create_buffer_copy(env, len, data, &copy, &argv[1]);
    argc = 2;
  } else if (kind == kError) {
    napi_create_string_utf8(env, data, NAPI_AUTO_LENGTH, &argv[1]);
    argc = 2;
  }
  napi_value result;
  if (napi_make_callback(env, nullptr, recv, cb, argc, argv, &result) == napi_pending_exception) {
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
  napi_close_handle_scope(env, scope);
}

void Fail(Probe* p, int status) {
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->tcp));
  Emit(p, kError, uv_err_name(status), 0);
}

void OnAlloc(uv_handle_t* h, size_t, uv_buf_t* out) {
  auto* p = static_cast<Probe*>(h->data);
  *out = uv_buf_init(p->buf, kReadSize);
}

void OnRead(uv_stream_t* s, ssize_t n, const uv_buf_t*) {
  auto* p = static_cast<Probe*>(s->data);
  if (p->closing || n == 0) return;
  if (n > 0) return Emit(p, kData, p->buf, size_t(n));
  if (n != UV_EOF) return Fail(p, int(n));
  uv_read_stop(s);
  Emit(p, kEnd, nullptr, 0);
}

void OnWritten(uv_write_t* w, int status) {
  auto* p = static_cast<Probe*>(w->data);
  if (status < 0 && !p->closing) Fail(p, status);
}

void OnConnected(uv_connect_t* c, int status) {
  auto* p = static_cast<Probe*>(c->data);
  if (p->closing) return;  // closed while connecting (status is UV_ECANCELED)
  if (status < 0) return Fail(p, status);
  auto* stream = reinterpret_cast<uv_stream_t*>(&p->tcp);
  if (p->request.empty()) return Emit(p, kConnected, nullptr, 0);
  uv_buf_t b = uv_buf_init(p->request.data(), unsigned(p->request.size()));
  int r = uv_write(&p->write, stream, &b, 1, OnWritten);
  if (r == 0) r = uv_read_start(stream, OnAlloc, OnRead);
  if (r < 0) Fail(p, r);
}

// The environment ends with the probe open (a worker terminated): closed now; the environment
// waits for OnClosed.
void OnEnvEnds(napi_async_cleanup_hook_handle, void* arg) { StartClose(static_cast<Probe*>(arg)); }

// JavaScript's handle was collected: an open probe is closed (the caller forgot it), and freed
// once libuv is done with it.
void OnCollected(napi_env, void* data, void*) {
  auto* p = static_cast<Probe*>(data);
  p->collected = true;
  if (!p->closed) StartClose(p);
  FreeIfDone(p);
}

napi_value Throw(napi_env env, const char* msg) {
  napi_throw_error(env, nullptr, msg);
  return nullptr;
}

// probeOpen(ip, port, request: Buffer, onEvent(kind, arg)) -> handle, or the name of the error
// (e.g. "EADDRNOTAVAIL") when the connect cannot even start. An empty request: a connect check.
napi_value Open(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  const char* usage = "probeOpen(ip, port 1..65535, request: Buffer, onEvent)";
  if (argc != 4) return Throw(env, usage);
  char ip[128];  // an IPv6 address with a scope id fits; longer is refused
  size_t ipLen = 0;
  uint32_t port = 0;
  bool isBuffer = false;
  napi_valuetype cbType = napi_undefined;
  if (napi_get_value_string_utf8(env, argv[0], ip, sizeof ip, &ipLen) != napi_ok || ipLen + 1 >= sizeof ip ||
      napi_get_value_uint32(env, argv[1], &port) != napi_ok || port < 1 || port > 65535 || napi_is_buffer(env, argv[2], &isBuffer) != napi_ok ||
      !isBuffer || napi_typeof(env, argv[3], &cbType) != napi_ok || cbType != napi_function)
    return Throw(env, usage);
  sockaddr_storage addr{};
  if (uv_ip4_addr(ip, int(port), reinterpret_cast<sockaddr_in*>(&addr)) != 0 && uv_ip6_addr(ip, int(port), reinterpret_cast<sockaddr_in6*>(&addr)) != 0)
    return Throw(env, "probeOpen: not an IP address");
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) return Throw(env, "probeOpen: no event loop");

  auto* p = new Probe();
  p->env = env;
  void* data;
  size_t len;
  napi_get_buffer_info(env, argv[2], &data, &len);
  p->request.assign(static_cast<const char*>(data), len);
  int r = uv_tcp_init(loop, &p->tcp);
  if (r < 0) {
    delete p;
    napi_value code;
    napi_create_string_utf8(env, uv_err_name(r), NAPI_AUTO_LENGTH, &code);
    return code;
  }
  p->tcp.data = p;
  p->connect.data = p;
  p->write.data = p;
  napi_value handle;
  napi_create_reference(env, argv[3], 1, &p->onEvent);
  napi_create_external(env, p, OnCollected, nullptr, &handle);
  napi_add_async_cleanup_hook(env, OnEnvEnds, p, &p->cleanup);
  r = uv_tcp_connect(&p->connect, &p->tcp, reinterpret_cast<const sockaddr*>(&addr), OnConnected);
  if (r < 0) {
    StartClose(p);  // freed once closed and collected
    napi_value code;
    napi_create_string_utf8(env, uv_err_name(r), NAPI_AUTO_LENGTH, &code);
    return code;
  }
  return handle;
}

// probeClose(handle): closes the connection (a FIN, or a reset with unread bytes); no event after
// it. Closing twice does nothing.
napi_value Close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  void* data = nullptr;
  if (argc != 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || data == nullptr) return Throw(env, "probeClose(handle)");
  StartClose(static_cast<Probe*>(data));
  return nullptr;
}

}  // namespace

void DefineProbe(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"probeOpen", nullptr, Open, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"probeClose", nullptr, Close, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}

}  // namespace roomgate
