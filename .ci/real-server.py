#!/usr/bin/env python3
"""upkeep against real model servers running a real small model, on loopback.

The integration tests talk to servers written to the vendors' API descriptions; this checks the
same code against the servers people run: llama-cpp-python's OpenAI-compatible server (and
llama.cpp's own `llama-server` when `--llama-server` names one), serving SmolLM2-135M-Instruct
at temperature 0. A 135M model rarely finishes a task, so nothing here judges its work: only
what upkeep controls. For every run, single and continuous mode, `--json`:

- every request was accepted, except at most one structured-output refusal, after which the
  form stepped down;
- every request carried the reply cap (`max_tokens`), `temperature: 0` and `stream: true`;
- every accepted stream ended (but one that `--timeout` cut) and was read: one `model_response`
  per ended stream, with the server's usage when
  its stream had some, else upkeep's estimate flagged `estimated: true`, and `run_finished.usage`
  their sum;
- the run ended within its budget (`--timeout`, `--max-turns`, `--max-cycles`) with an outcome
  that matches its exit code (docs/events.md), never `error`, a crash or a hang;
- the clone was removed (TMPDIR is a fresh directory, empty afterwards).

A logging proxy on loopback between upkeep and the server records each request and the
response's status, usage and end. Installing is `.ci/real-server-setup`'s job.

Usage: python3 .ci/real-server.py [--llama-server PATH] [--only SERVER] [--keep DIR]
"""

import argparse
import http.client
import http.server
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
LLM_DIR = ROOT / ".ci" / "llm"
VENV_PYTHON = LLM_DIR / "venv" / "bin" / "python"
# Where `cargo build` put the binary: `CARGO_TARGET_DIR` when set (relative to the checkout, as
# cargo reads it), else target/.
UPKEEP = ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "debug" / "upkeep"
# The server's context window; upkeep is told the same with --context-window.
N_CTX = 8192
# How long a server may take to load the model and answer /v1/models.
READY_SECONDS = 180
# What a run may take past its own --timeout before it counts as a hang.
HANG_GRACE_SECONDS = 60

# outcome -> exit code (docs/events.md, "Outcomes").
EXIT_CODES = {
    "pull_request": 0, "completed": 0, "no_tasks": 0, "max_cycles": 0, "pr_limit": 0,
    "pr_hourly_limit": 0, "outside_schedule": 0, "question": 3, "limit": 4, "stuck": 4,
    "error": 1, "usage_error": 2, "interrupted": 130,
}
# Outcomes an honest run against a working server may end with; `error`, `usage_error` and
# `interrupted` mean upkeep (or the harness) failed.
HONEST_OUTCOMES = {"pull_request", "completed", "no_tasks", "max_cycles", "question", "limit", "stuck"}
# What a server says when it refuses a structured-output form (docs/providers.md, "Streaming").
REFUSAL_MARKERS = ("response_format", "json_schema", "schema", "structured output")


class Failure(Exception):
    pass


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The logging proxy: forwards every request to the server as it is and streams the reply back,
# recording the request body and what came back.


class Exchange:
    def __init__(self, path, body):
        self.path = path
        self.body = body
        self.status = None
        self.error_body = ""
        self.saw_done = False
        self.finish_reasons = []
        self.usage = None
        self.chunks = 0


class Proxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.exchanges = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.forward(None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.forward(self.rfile.read(length))

            def forward(self, raw):
                try:
                    self.relay(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # upkeep dropped the stream (its --timeout): the exchange stays unended

            def relay(self, raw):
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = {"unparsable": raw.decode("utf-8", "replace")}
                exchange = Exchange(self.path, body)
                if self.command == "POST":
                    with proxy.lock:
                        proxy.exchanges.append(exchange)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=600)
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                upstream.request(self.command, self.path, body=raw, headers=headers)
                response = upstream.getresponse()
                exchange.status = response.status
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.end_headers()
                pending = b""
                while True:
                    chunk = response.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    if response.status != 200:
                        exchange.error_body += chunk.decode("utf-8", "replace")
                        continue
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        proxy.read_sse_line(exchange, line.strip())
                proxy.read_sse_line(exchange, pending.strip())
                upstream.close()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def read_sse_line(exchange, line):
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            exchange.saw_done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        exchange.chunks += 1
        if event.get("usage"):
            exchange.usage = event["usage"]
        for choice in event.get("choices") or []:
            if choice.get("finish_reason"):
                exchange.finish_reasons.append(choice["finish_reason"])

    def take(self):
        with self.lock:
            taken, self.exchanges = self.exchanges, []
        return taken

    def close(self):
        self.server.shutdown()


# ---------------------------------------------------------------------------------------------
# Servers.


class Server:
    def __init__(self, name, command, log_path):
        self.name = name
        self.port = free_port()
        self.log_path = log_path
        self.log = open(log_path, "w")
        argv = [part.replace("{port}", str(self.port)) for part in command]
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self):
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"{self.name} exited with {self.process.returncode} while starting; log:\n{self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/v1/models")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(1)
        raise Failure(f"{self.name} was not ready after {READY_SECONDS} s; log:\n{self.tail()}")

    def tail(self):
        self.log.flush()
        return "".join(open(self.log_path, errors="replace").readlines()[-30:])

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def model_path():
    ggufs = sorted((LLM_DIR / "model").glob("*.gguf"))
    if len(ggufs) != 1:
        raise Failure(f"expected one .gguf in {LLM_DIR / 'model'}, found {ggufs}: bash .ci/real-server-setup installs it")
    return ggufs[0]


# ---------------------------------------------------------------------------------------------
# The repository upkeep works on: a README, a small source file and one task.


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repository(path):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# greet\n\nA tiny library that greets people.\n")
    (path / "greet.py").write_text('def hello(name):\n    return "Hello, " + name\n')
    (path / "TODO.md").write_text("# Tasks\n\n- [ ] Add a `goodbye(name)` function to greet.py that returns \"Goodbye, \" + name.\n")
    git(path, "add", "-A")
    git(path, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "-q", "-m", "Initial commit")


# ---------------------------------------------------------------------------------------------
# One upkeep run and its checks.


class Run:
    def __init__(self, label, args, reply_cap, timeout_seconds, max_cycles=None):
        self.label = label
        self.args = args
        self.reply_cap = reply_cap
        self.timeout_seconds = timeout_seconds
        self.max_cycles = max_cycles


def run_upkeep(run, repo, base_url, work, checks):
    tmpdir = work / f"tmp-{run.label}"
    tmpdir.mkdir()
    argv = [
        str(UPKEEP), "run", "--repo", str(repo), "--forge", "local", "--json",
        "--base-url", base_url, "--model", "smollm2-135m", "--context-window", str(N_CTX),
        "--temperature", "0", "--timeout", f"{run.timeout_seconds}s", *run.args,
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith("UPKEEP_")}
    env.update(TMPDIR=str(tmpdir), NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env,
                              timeout=run.timeout_seconds + HANG_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        raise Failure(f"{run.label}: upkeep still running {run.timeout_seconds + HANG_GRACE_SECONDS} s after it started (--timeout {run.timeout_seconds}s): a hang")
    elapsed = time.monotonic() - started
    (work / f"{run.label}.jsonl").write_text(done.stdout)
    (work / f"{run.label}.stderr").write_text(done.stderr)

    def check(ok, what):
        checks.append((run.label, what))
        if not ok:
            raise Failure(f"{run.label}: {what}\n--- stderr (last lines):\n" + "\n".join(done.stderr.splitlines()[-25:]))

    check(done.returncode >= 0 and "panicked" not in done.stderr, f"no crash (exit code {done.returncode})")
    events = []
    for number, line in enumerate(done.stdout.splitlines(), 1):
        try:
            events.append(json.loads(line))
        except ValueError:
            check(False, f"stdout line {number} is JSON: {line[:200]!r}")
    finished = [e for e in events if e.get("type") == "run_finished"]
    check(len(finished) == 1 and events[-1] is finished[0], "one run_finished, last")
    finished = finished[0]
    outcome = finished["outcome"]
    check(outcome in HONEST_OUTCOMES, f"an honest outcome ({outcome}; error: {finished.get('error')})")
    check(finished["exit_code"] == done.returncode == EXIT_CODES[outcome],
          f"exit code {done.returncode} = run_finished.exit_code {finished['exit_code']} = the code of {outcome}")
    check(elapsed <= run.timeout_seconds + 15, f"ended within its --timeout {run.timeout_seconds}s (took {elapsed:.0f} s)")
    cycles = [e for e in events if e.get("type") == "cycle_started"]
    check(len(cycles) == finished["cycles"] and len(cycles) <= (run.max_cycles or 1),
          f"{len(cycles)} cycle(s), at most {run.max_cycles or 1}")

    exchanges = [x for x in PROXY.take() if x.path.endswith("/chat/completions")]
    responses = [e for e in events if e.get("type") == "model_response"]
    refused = [x for x in exchanges if x.status != 200]
    accepted = [x for x in exchanges if x.status == 200]
    check(len(exchanges) >= 1, f"{len(exchanges)} request(s) reached the server")
    check(len(refused) <= 1, f"every request accepted but at most one ({len(refused)} refused: "
          + "; ".join(f"{x.status} {x.error_body[:200]}" for x in refused) + ")")
    if refused:
        index = exchanges.index(refused[0])
        form = (refused[0].body.get("response_format") or {}).get("type")
        later = {(x.body.get("response_format") or {}).get("type") for x in exchanges[index + 1:]}
        check(any(marker in refused[0].error_body for marker in REFUSAL_MARKERS) and form not in later,
              f"the refusal ({refused[0].status}) was of the structured-output form {form}, never asked again")
    for number, exchange in enumerate(exchanges, 1):
        body = exchange.body
        check(body.get("max_tokens") == run.reply_cap,
              f"request {number} carried the reply cap max_tokens={run.reply_cap} (sent {body.get('max_tokens')})")
        check(body.get("temperature") == 0, f"request {number} carried temperature 0 (sent {body.get('temperature')})")
        check(body.get("stream") is True, f"request {number} asked for a stream")
    # A stream still running when --timeout struck was dropped by upkeep: only the last one, and
    # only in a run that ended with the limit outcome for its --timeout.
    cut = [x for x in accepted if not (x.saw_done and x.finish_reasons)]
    timed_out = outcome == "limit" and "--timeout" in done.stderr
    check(not cut or (len(cut) == 1 and cut[0] is exchanges[-1] and timed_out),
          f"every stream ended ([DONE] after a finish_reason) but one cut by --timeout ({len(cut)} unended)")
    accepted = [x for x in accepted if x not in cut]
    check(len(responses) == len(accepted), f"one model_response per ended stream ({len(responses)} for {len(accepted)})")
    estimated = 0
    for number, (event, exchange) in enumerate(zip(responses, accepted), 1):
        usage = event["usage"]
        if exchange.usage:
            check(not usage.get("estimated")
                  and usage["input_tokens"] == exchange.usage["prompt_tokens"]
                  and usage["output_tokens"] == exchange.usage["completion_tokens"],
                  f"response {number}: the server's usage counted ({usage} for {exchange.usage})")
        else:
            estimated += 1
            check(usage.get("estimated") is True and usage["input_tokens"] > 0 and usage["output_tokens"] > 0,
                  f"response {number}: no usage in the stream, so estimated and flagged ({usage})")
    totals = {key: sum(e["usage"][key] for e in responses) for key in ("input_tokens", "output_tokens")}
    check(all(finished["usage"][key] == value for key, value in totals.items()),
          f"run_finished.usage {finished['usage']} is the sum of the model_response usages {totals}")
    leftovers = sorted(p.name for p in tmpdir.iterdir())
    check(not leftovers, f"the clone removed (TMPDIR empty; left: {leftovers})")
    forms = sorted({(x.body.get("response_format") or {}).get("type") or "none" for x in accepted})
    return {
        "outcome": outcome, "exit_code": done.returncode, "seconds": round(elapsed), "requests": len(exchanges),
        "refused": [x.status for x in refused], "estimated_usage": estimated, "forms_accepted": forms,
        "cycles": len(cycles), "turns": len(responses), "cut_by_timeout": len(cut),
        "stream_usage": sum(1 for x in accepted if x.usage),
        "finish_reasons": sorted({r for x in accepted for r in x.finish_reasons}),
    }


def exercise(server_name, command, runs, work, checks):
    print(f"== {server_name}")
    global PROXY
    started = time.monotonic()
    server = Server(server_name, command, work / f"{server_name}.log")
    try:
        server.wait_ready()
        ready = time.monotonic() - started
        print(f"  ready in {ready:.0f} s on 127.0.0.1:{server.port}")
        PROXY = Proxy(server.port)
        base_url = f"http://127.0.0.1:{PROXY.port}/v1"
        results = {}
        for run in runs:
            repo = work / f"{server_name}-{run.label}-repo"
            make_repository(repo)
            run.label = f"{server_name}-{run.label}"
            results[run.label] = run_upkeep(run, repo, base_url, work, checks)
            print(f"  {run.label}: {json.dumps(results[run.label])}")
        PROXY.close()
        return results
    finally:
        server.stop()


TASK = "Add the goodbye function that TODO.md asks for."


def runs_for(server_name):
    """Single mode and continuous mode, each with its reply cap and budgets.

    llama-cpp-python gets the default cap (a quarter of the window) once. llama-server's grammar
    for the strict JSON schema slows to under one token a second after a few hundred tokens on two
    cores (measured: 52 tokens/s for the first 500, then 0.2-2), so its runs cap replies lower.
    """
    if server_name == "llama-cpp-python":
        return [
            Run("single", ["--task", TASK, "--max-turns", "3", "--no-review"], reply_cap=N_CTX // 4, timeout_seconds=420),
            Run("continuous", ["--continuous", "--max-cycles", "2", "--max-turns", "2", "--max-reply-tokens", "384"],
                reply_cap=384, timeout_seconds=420, max_cycles=2),
        ]
    return [
        Run("single", ["--task", TASK, "--max-turns", "3", "--no-review", "--max-reply-tokens", "160"],
            reply_cap=160, timeout_seconds=240),
        Run("continuous", ["--continuous", "--max-cycles", "2", "--max-turns", "2", "--max-reply-tokens", "128"],
            reply_cap=128, timeout_seconds=240, max_cycles=2),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-server", help="llama.cpp's llama-server binary: run the same checks against it")
    parser.add_argument("--only", choices=["llama-cpp-python", "llama-server"], help="check this server alone")
    parser.add_argument("--keep", help="keep the events, stderr and server logs in this directory")
    options = parser.parse_args()
    for path in (VENV_PYTHON, UPKEEP):
        if not path.exists():
            print(f"missing: {path} (bash .ci/real-server-setup installs the server; cargo build builds upkeep)", file=sys.stderr)
            return 1
    started = time.monotonic()
    work = pathlib.Path(options.keep or tempfile.mkdtemp(prefix="upkeep-real-server-"))
    work.mkdir(parents=True, exist_ok=True)
    gguf = model_path()
    checks = []
    servers = [("llama-cpp-python", [str(VENV_PYTHON), "-m", "llama_cpp.server", "--model", str(gguf),
                                     "--host", "127.0.0.1", "--port", "{port}", "--n_ctx", str(N_CTX)])]
    if options.llama_server:
        servers.append(("llama-server", [options.llama_server, "--model", str(gguf), "--host", "127.0.0.1",
                                         "--port", "{port}", "--ctx-size", str(N_CTX), "--parallel", "1"]))
    servers = [(name, command) for name, command in servers if options.only in (None, name)]
    try:
        for name, command in servers:
            exercise(name, command, runs_for(name), work, checks)
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        print(f"(events, stderr and server logs: {work})", file=sys.stderr)
        return 1
    if not options.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"real servers: {len(checks)} checks passed over {len(servers)} server(s) in {time.monotonic() - started:.0f} s")
    return 0


PROXY = None

if __name__ == "__main__":
    sys.exit(main())
