#!/usr/bin/env bash
# End-to-end checks of mgt-generate --server on tiny checkpoints trained here, over loopback
# only: Megatron's PUT /api answers, its refusals (400 with a JSON message), a bounded load of
# concurrent clients all answered, clients that trickle their headers cut off at the request
# deadline (408) without keeping others out, then a prompt, clean stop on SIGTERM (exit 0) with
# such clients connected.
# Usage: bash tests/e2e/mgt_generate_server.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"
server_pid=
trap '[[ -n "$server_pid" ]] && kill -KILL "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT

gpt2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$src/datasets/gpt2-vocab.json"
      --merge-file "$src/datasets/gpt2-merges.txt")
"$bin/mgt-train" --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --train-iters 2 \
  --eval-iters 0 --save "$work/ckpt" --save-interval 2 "${gpt2[@]}" >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "training the checkpoint"; }

# Server flags are checked before anything loads.
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --port 5000
grep -q -- "--port needs --server" "$work/err.txt" || fail "--port without --server"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --server --top-k 0
grep -q -- "--top-k does not apply with --server" "$work/err.txt" || fail "--top-k with --server"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --server --port 70000
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --server-request-timeout 5
grep -q -- "--server-request-timeout needs --server" "$work/err.txt" || fail "--server-request-timeout without --server"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --server --server-max-connections 0
grep -q -- "--server-max-connections must be between 1 and 400, got 0" "$work/err.txt" ||
  fail "--server-max-connections 0 not refused"
expect_status 2 "$bin/mgt-generate" --load "$work/ckpt" --server --server-request-timeout 0
grep -q -- "--server-request-timeout must be between" "$work/err.txt" || fail "--server-request-timeout 0 not refused"

# start_server LOG ARGS...: starts a server on port 0 (it picks a free port and names it in its
# start-up line), setting server_pid and port. The log exists before the server starts: the
# background job opens it asynchronously, and a first read could find none.
start_server() {
  local log=$1; shift
  : >"$log"
  "$bin/mgt-generate" --server --port 0 "$@" 2>"$log" &
  server_pid=$!
  port=
  for _ in $(seq 300); do
    port=$(sed -n 's|.*serving .* on http://127\.0\.0\.1:\([0-9]*\)/api.*|\1|p' "$log")
    [[ -n "$port" ]] && return
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; fail "the server exited at start"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "the server did not start within 30 s"
}

# stop_server LOG: SIGTERM, then exit 0 with its message.
stop_server() {
  kill -TERM "$server_pid"
  local status=0
  # Far less than the 30 s a trickling client could take; the bound only catches a stop that waits.
  for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$server_pid" 2>/dev/null && fail "the server did not stop within 10 s of SIGTERM"
  wait "$server_pid" || status=$?
  server_pid=
  [[ $status == 0 ]] || { tail -5 "$1" >&2; fail "the server exited $status after SIGTERM"; }
  grep -q "stopped by SIGTERM" "$1" || fail "no stop message"
}

start_server "$work/server.log" --load "$work/ckpt" --micro-batch-size 8

timeout 60 python3 - "$port" <<'PY' || { tail -20 "$work/server.log" >&2; fail "server answers"; }
import json, socket, sys, threading, urllib.request, urllib.error

url = f"http://127.0.0.1:{sys.argv[1]}/api"

def call(body, method="PUT", path="/api", raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url.replace("/api", path), data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

# Megatron's answer: the whole sequences, per-token segments, log-probabilities after the first.
status, a = call({"prompts": ["Hello world", "The quick brown fox"], "tokens_to_generate": 5,
                  "logprobs": True, "top_k": 1})
assert status == 200, (status, a)
assert set(a) == {"text", "segments", "tokens", "logprobs"}, a
assert a["text"][0].startswith("Hello world") and a["text"][1].startswith("The quick brown fox"), a
for text, segs, toks, lps in zip(a["text"], a["segments"], a["tokens"], a["logprobs"]):
    assert len(segs) == len(toks) and len(lps) == len(toks) - 1, a
    assert all(lp is None or lp <= 0 for lp in lps), a
    assert 2 < len(toks) <= 4 + 5 + 1, a
assert call({"prompts": ["Hello world", "The quick brown fox"], "tokens_to_generate": 5,
             "logprobs": True, "top_k": 1}) == (200, a), "greedy answers differ"

# No logprobs unless asked; a seed reproduces sampling; scoring only with tokens_to_generate 0.
status, b = call({"prompts": ["Once upon"], "tokens_to_generate": 8, "random_seed": 5, "temperature": 1.5})
assert status == 200 and "logprobs" not in b, b
assert call({"prompts": ["Once upon"], "tokens_to_generate": 8, "random_seed": 5, "temperature": 1.5}) == (200, b)
status, s = call({"prompts": ["Once upon a time"], "tokens_to_generate": 0, "logprobs": True})
assert status == 200 and s["text"] == ["Once upon a time"] and len(s["logprobs"][0]) == len(s["tokens"][0]) - 1, s
status, e = call({"prompts": [""], "add_BOS": True, "tokens_to_generate": 3, "top_p": 0.9, "stop_on_eol": True,
                  "prevent_newline_after_colon": True, "no_log": True})
assert status == 200 and e["text"][0].startswith("<|endoftext|>"), e

# Refusals: HTTP 400 with Megatron's message as JSON {"message": ...}.
def refused(body, message, **kw):
    status, r = call(body, **kw)
    assert status == 400 and r["message"].startswith(message), (body, status, r)

refused({"tokens_to_generate": 3}, "prompts argument required")
refused({"prompts": "Hello"}, "prompts is not a list of strings")
refused({"prompts": ["Hello", 3]}, "prompts is not a list of strings")
refused({"prompts": ["Hello"], "temperature": 0}, "temperature must be a positive number less than or equal to 100.0")
refused({"prompts": ["Hello"], "top_p": 1}, "top_p must be a positive float less than or equal to 1.0")
refused({"prompts": ["Hello"], "beam_width": 2}, "Beam search is no longer supported.")
refused({"prompts": [""]}, "Empty prompts require add_BOS=true")
refused({"prompts": ["Hello"], "tokens_to_generate": 1000}, "Length of prompt + tokens_to_generate longer than allowed")
refused(None, "the request body is not valid JSON", raw=b'{"prompts": [')
refused(None, "the request body must be a JSON object", raw=b'[1, 2]')
# Python's json takes any integer; one beyond 64 bits is named, not called invalid JSON.
refused({"prompts": ["Hello"], "tokens_to_generate": 10**30},
        f"tokens_to_generate is {10**30}, too large: integers in a request must fit in 64 bits")

# A Content-Length that is not a count is refused as malformed (400), not as too large.
def raw_exchange(data):
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30) as s:
        s.sendall(data)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    return answer
answer = raw_exchange(b"PUT /api HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n")
assert answer.startswith(b"HTTP/1.1 400 ") and b"Content-Length must be a non-negative decimal integer" in answer, answer
status, r = call({"prompts": ["Hello"]}, method="POST")
assert status == 405 and "PUT" in r["message"], (status, r)
status, r = call({"prompts": ["Hello"]}, path="/nowhere")
assert status == 404 and "message" in r, (status, r)

# Load: 32 clients × 4 requests each, mixed settings, every one answered 200.
results, lock = [], threading.Lock()
def client(k):
    for j in range(4):
        body = {"prompts": [f"Client {k} request {j}"] * (1 + (k + j) % 3), "tokens_to_generate": 1 + (k * 7 + j) % 8,
                "no_log": True}
        if k % 2:
            body.update(top_k=1, logprobs=True)
        else:
            body.update(top_p=0.9, temperature=0.8, random_seed=k)
        try:
            status, r = call(body)
            ok = status == 200 and len(r["text"]) == len(body["prompts"]) and \
                 all(t.startswith(f"Client {k} request {j}") for t in r["text"])
        except Exception as exc:  # a refused or dropped connection counts as a failure
            ok, status = False, repr(exc)
        with lock:
            results.append((ok, status))
threads = [threading.Thread(target=client, args=(k,)) for k in range(32)]
for t in threads: t.start()
for t in threads: t.join(45)
assert not any(t.is_alive() for t in threads), "clients still waiting after 45 s"
assert len(results) == 128 and all(ok for ok, _ in results), [s for ok, s in results if not ok][:5]

# Still serving.
assert call({"prompts": ["Still there?"], "tokens_to_generate": 2})[0] == 200
PY

kill -0 "$server_pid" 2>/dev/null || fail "the server died under load"
# One line per logged request; no_log requests are not logged.
logged=$(grep -c "PUT /api from 127.0.0.1" "$work/server.log" || true)
(( logged == 17 )) || { cat "$work/server.log" >&2; fail "expected 17 logged requests, got $logged"; }
grep -qF 'PUT /api from 127.0.0.1: 400 {"message": "Beam search' "$work/server.log" || fail "a refused request's log line"
grep -qF 'PUT /api from 127.0.0.1: 2 prompts, tokens_to_generate 5: 200 in' "$work/server.log" || fail "a request's log line"

# SIGTERM with clients trickling their headers (the server waits up to 30 s for a request): they
# are cut off at once. Before, each kept the stop waiting for its request.
python3 - "$port" "$work/trickling" <<'PY' &
import socket, sys, time
clients = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(3)]
for c in clients:
    c.sendall(b"PUT /api HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
open(sys.argv[2], "w").close()
for _ in range(120):
    try:
        for c in clients:
            c.sendall(b"a")
    except OSError:
        break
    time.sleep(0.5)
PY
trickler=$!
for _ in $(seq 100); do [[ -e "$work/trickling" ]] && break; sleep 0.1; done
sleep 1
stop_server "$work/server.log"
kill "$trickler" 2>/dev/null || true
wait "$trickler" 2>/dev/null || true

# A NullTokenizer model, whose prompts are token ids, and a server of 4 connections that gives a
# request 2 s.
"$bin/mgt-train" --mock-data --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 \
  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --train-iters 1 \
  --eval-iters 0 --save "$work/null-ckpt" --save-interval 1 --tokenizer-type NullTokenizer --vocab-size 100 \
  >"$work/train-null.log" 2>&1 || { cat "$work/train-null.log" >&2; fail "training the NullTokenizer checkpoint"; }
start_server "$work/server-null.log" --load "$work/null-ckpt" --server-request-timeout 2 --server-max-connections 4
timeout 90 python3 - "$port" <<'PY' || { tail -20 "$work/server-null.log" >&2; fail "bounded server answers"; }
import json, socket, sys, threading, time, urllib.request, urllib.error

port = int(sys.argv[1])

def call(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api", data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

# Ids outside the model's vocabulary: the client's error (400), not the server's (500).
status, r = call({"prompts": ["1 2", "3 99999"], "tokens_to_generate": 2})
assert status == 400 and r["message"].startswith("prompts[1]: NullTokenizer: token '99999' is outside the vocabulary"), (status, r)
assert call({"prompts": ["1 2"], "tokens_to_generate": 2})[0] == 200

# As many clients as connections, each trickling a header byte every 0.5 s: each is answered 408
# and disconnected at its deadline, and a request sent meanwhile is answered.
answers = [b""] * 4
def trickle(k):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"PUT /api HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        s.settimeout(0.5)
        for _ in range(120):
            try:
                s.sendall(b"a")
                chunk = s.recv(4096)
                if not chunk:
                    break
                answers[k] += chunk
            except socket.timeout:
                continue
            except OSError:
                break
threads = [threading.Thread(target=trickle, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
time.sleep(0.5)
status, r = call({"prompts": ["4 5 6"], "tokens_to_generate": 3})
assert status == 200 and r["tokens"][0][:3] == [4, 5, 6], (status, r)
for t in threads:
    t.join(60)
assert not any(t.is_alive() for t in threads), "a trickling client was never cut off"
for a in answers:
    assert a.startswith(b"HTTP/1.1 408 ") and b"the request was not received within 2 s" in a, a
PY
stop_server "$work/server-null.log"
echo "mgt-generate server: ok ($(sed -n 's/.*compute device: \([^ ]*\).*/\1/p' "$work/server.log" | head -1))"
