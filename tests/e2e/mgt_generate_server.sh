#!/usr/bin/env bash
# End-to-end checks of mgt-generate --server on a tiny checkpoint trained here, over loopback
# only: Megatron's PUT /api answers, its refusals (400 with a JSON message), a bounded load of
# concurrent clients all answered, then a clean stop on SIGTERM (exit 0).
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

# Port 0: the server picks a free port and names it in its start-up line. The log exists before
# the server starts: the background job opens it asynchronously, and a first read could find none.
: >"$work/server.log"
"$bin/mgt-generate" --server --port 0 --load "$work/ckpt" --micro-batch-size 8 2>"$work/server.log" &
server_pid=$!
port=
for _ in $(seq 300); do
  port=$(sed -n 's|.*serving .* on http://127\.0\.0\.1:\([0-9]*\)/api.*|\1|p' "$work/server.log")
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the server exited at start"; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/server.log" >&2; fail "the server did not start within 30 s"; }

timeout 60 python3 - "$port" <<'PY' || { tail -20 "$work/server.log" >&2; fail "server answers"; }
import json, sys, threading, urllib.request, urllib.error

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
(( logged == 16 )) || { cat "$work/server.log" >&2; fail "expected 16 logged requests, got $logged"; }
grep -qF 'PUT /api from 127.0.0.1: 400 {"message": "Beam search' "$work/server.log" || fail "a refused request's log line"
grep -qF 'PUT /api from 127.0.0.1: 2 prompts, tokens_to_generate 5: 200 in' "$work/server.log" || fail "a request's log line"

kill -TERM "$server_pid"
status=0
for _ in $(seq 200); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "the server did not stop within 20 s of SIGTERM"
wait "$server_pid" || status=$?
server_pid=
[[ $status == 0 ]] || { tail -5 "$work/server.log" >&2; fail "the server exited $status after SIGTERM"; }
grep -q "stopped by SIGTERM" "$work/server.log" || fail "no stop message"
echo "mgt-generate server: ok ($(sed -n 's/.*compute device: \([^ ]*\).*/\1/p' "$work/server.log" | head -1))"
