"""Runs the real agents and SDKs of tests/gateway/node against a base URL (the
fake upstream, or llmlimitd's gateway), headless and offline, each in a clean
environment with a temporary HOME (Claude Code) or CODEX_HOME (Codex):
run_claude, run_codex, run_anthropic_sdk, run_openai_responses. Each returns
a Result (code, stdout, stderr, json) and leaves no process behind;
spawn_claude and spawn_codex start one in the background, to be killed.
skip_unless_installed() exits 77 (ctest: skipped) when node or a package is
missing (npm ci --prefix tests/gateway/node installs them)."""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from node_sdk import node_from_argv  # noqa: F401 - the tests take it from here

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
MODULES = os.path.join(NODE_DIR, "node_modules")
CLAUDE = os.path.join(MODULES, ".bin", "claude")
CODEX = os.path.join(MODULES, ".bin", "codex")
SDK_SCRIPT = os.path.join(NODE_DIR, "agent_sdks.mjs")
PACKAGES = ("openai", "@anthropic-ai/sdk", "@anthropic-ai/claude-code", "@openai/codex")
TIMEOUT_SECONDS_DEFAULT = 180
# The variable that holds the API key in Codex's config.toml (env_key).
CODEX_KEY_VARIABLE = "LLMLIMIT_TEST_CODEX_KEY"
SKIP = 77

# code: the exit code, None when the run was cut at its timeout; json: what
# the client printed, parsed (Claude Code: its result object; Codex: the list
# of its --json events; the SDK driver: {call: result}), None when unparsable.
Result = collections.namedtuple("Result", "code stdout stderr json")


def missing_prerequisite(node):
    """Why the agents cannot run here, or None."""
    if not node or not os.access(node, os.X_OK):
        return "node not found"
    for package in PACKAGES:
        if not os.path.isdir(os.path.join(MODULES, package)):
            return "%s is not installed (npm ci --prefix tests/gateway/node)" % package
    for binary in (CLAUDE, CODEX):
        reason = version_problem(node, binary)
        if reason:
            return reason
    return None


def version_problem(node, binary):
    """Whether `binary --version` runs: the native binaries come in
    per-platform optional packages that npm may have left out."""
    env = {"PATH": os.path.dirname(node) + os.pathsep + os.environ.get("PATH", "")}
    try:
        with tempfile.TemporaryDirectory(prefix="agent-version-") as home:
            env["HOME"] = env["CODEX_HOME"] = home
            result = run_group([binary, "--version"], env, home, 60)
    except OSError as error:
        return "%s does not run: %s" % (os.path.basename(binary), error)
    if result.code != 0:
        return "%s --version failed: %s" % (os.path.basename(binary),
                                            (result.stderr or result.stdout).strip()[:200])
    return None


def skip_unless_installed(node):
    reason = missing_prerequisite(node)
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)


def run_group(argv, env, cwd, timeout_s):
    """Runs argv in its own process group with no standard input; at the end
    (or at the timeout) every process of the group is killed, so a native
    binary that a wrapper started cannot outlive the test."""
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        code = process.returncode
    except subprocess.TimeoutExpired:
        kill_group(process.pid, signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        code = None
    kill_group(process.pid, signal.SIGKILL)
    return Result(code, stdout, stderr, None)


def kill_group(group, signum):
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass


def clean_env(home, node=None, extra=None):
    """Only what the client needs: none of this machine's own keys or URLs."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if node:
        path = os.path.dirname(node) + os.pathsep + path
    env = {"PATH": path, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb"}
    env.update(extra or {})
    return env


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def run_claude(base_url, prompt, api_key=None, auth_token=None, env=None, args=(),
               node=None, timeout_s=TIMEOUT_SECONDS_DEFAULT):
    """`claude -p PROMPT --output-format json` with ANTHROPIC_BASE_URL=base_url
    (no /v1: Claude Code adds it), the key as ANTHROPIC_API_KEY (sent as
    x-api-key) or ANTHROPIC_AUTH_TOKEN (sent as a bearer token),
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1; env adds variables
    (CLAUDE_CODE_MAX_RETRIES, ANTHROPIC_CUSTOM_HEADERS, ...)."""
    with tempfile.TemporaryDirectory(prefix="claude-home-") as home:
        variables = {"ANTHROPIC_BASE_URL": base_url,
                     "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        if api_key is not None:
            variables["ANTHROPIC_API_KEY"] = api_key
        if auth_token is not None:
            variables["ANTHROPIC_AUTH_TOKEN"] = auth_token
        variables.update(env or {})
        argv = [CLAUDE, "-p", prompt, "--output-format", "json"] + list(args)
        result = run_group(argv, clean_env(home, node, variables), home, timeout_s)
    return result._replace(json=parse_json(result.stdout))


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{ %s }" % ", ".join("%s = %s" % (json.dumps(k), toml_value(v))
                                     for k, v in value.items())
    return json.dumps(str(value))


def codex_config(base_url, model, provider=None, top=None):
    """config.toml: the model, and a provider "llmlimit" at base_url + /v1
    speaking the Responses API, its key in CODEX_KEY_VARIABLE; provider adds
    provider fields (stream_max_retries, request_max_retries, http_headers...),
    top adds top-level ones."""
    lines = ["model = %s" % toml_value(model), 'model_provider = "llmlimit"']
    lines += ["%s = %s" % (name, toml_value(value)) for name, value in (top or {}).items()]
    fields = {"name": "llmlimit", "base_url": base_url + "/v1", "env_key": CODEX_KEY_VARIABLE,
              "wire_api": "responses"}
    fields.update(provider or {})
    lines += ["", "[model_providers.llmlimit]"]
    lines += ["%s = %s" % (name, toml_value(value)) for name, value in fields.items()]
    return "\n".join(lines) + "\n"


def run_codex(base_url, prompt, api_key, model, provider=None, top=None, env=None, node=None,
              timeout_s=TIMEOUT_SECONDS_DEFAULT, config_text=None, key_variable=None):
    """`codex exec --json --skip-git-repo-check PROMPT` with CODEX_HOME holding
    codex_config(...) (or config_text as it is, its key in key_variable), in
    an empty working directory; json is the list of the JSON events Codex
    printed (turn.completed has the usage)."""
    with tempfile.TemporaryDirectory(prefix="codex-home-") as home, \
            tempfile.TemporaryDirectory(prefix="codex-work-") as work:
        with open(os.path.join(home, "config.toml"), "w", encoding="utf-8") as config:
            config.write(config_text or codex_config(base_url, model, provider, top))
        variables = {"CODEX_HOME": home, (key_variable or CODEX_KEY_VARIABLE): api_key}
        variables.update(env or {})
        argv = [CODEX, "exec", "--json", "--skip-git-repo-check", prompt]
        result = run_group(argv, clean_env(home, node, variables), work, timeout_s)
    events = [parse_json(line) for line in result.stdout.splitlines() if line.strip()]
    return result._replace(json=events if all(e is not None for e in events) else None)


class Spawned:
    """An agent started in the background in its own process group, for
    tests that kill it mid-call: kill() sends SIGKILL to the whole group
    (a wrapper and the native binary it started) and waits; close() also
    removes its temporary directories. Use it as a context manager."""

    def __init__(self, argv, env, cwd, directories):
        self.directories = directories
        self.process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)

    def kill(self):
        kill_group(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self):
        self.kill()
        for directory in self.directories:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def spawn_claude(base_url, prompt, api_key, env=None, args=(), node=None):
    """run_claude's command, started in the background: a Spawned."""
    home = tempfile.mkdtemp(prefix="claude-home-")
    variables = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key,
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    variables.update(env or {})
    argv = [CLAUDE, "-p", prompt, "--output-format", "json"] + list(args)
    return Spawned(argv, clean_env(home, node, variables), home, [home])


def spawn_codex(base_url, prompt, api_key, model, provider=None, node=None):
    """run_codex's command, started in the background: a Spawned."""
    home = tempfile.mkdtemp(prefix="codex-home-")
    work = tempfile.mkdtemp(prefix="codex-work-")
    with open(os.path.join(home, "config.toml"), "w", encoding="utf-8") as config:
        config.write(codex_config(base_url, model, provider))
    variables = {"CODEX_HOME": home, CODEX_KEY_VARIABLE: api_key}
    argv = [CODEX, "exec", "--json", "--skip-git-repo-check", prompt]
    return Spawned(argv, clean_env(home, node, variables), work, [home, work])


def codex_message(events):
    """The text of Codex's last agent message, or None."""
    texts = [e["item"].get("text") for e in events or []
             if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
    return texts[-1] if texts else None


def run_sdk(node, base_url, api_key, calls, model, max_retries=0, max_tokens=None,
            timeout_s=TIMEOUT_SECONDS_DEFAULT):
    """node/agent_sdks.mjs: the official SDKs' calls named in `calls`
    (anthropic, anthropic_stream, responses, responses_stream) against
    base_url (no /v1); json is {call: what it gave back}."""
    with tempfile.TemporaryDirectory(prefix="sdk-home-") as home:
        variables = {"AGENT_SDK_BASE_URL": base_url, "AGENT_SDK_API_KEY": api_key,
                     "AGENT_SDK_CALLS": ",".join(calls), "AGENT_SDK_MODEL": model,
                     "AGENT_SDK_MAX_RETRIES": str(max_retries)}
        if max_tokens is not None:
            variables["AGENT_SDK_MAX_TOKENS"] = str(max_tokens)
        result = run_group([node, SDK_SCRIPT], clean_env(home, node, variables), NODE_DIR,
                           timeout_s)
    lines = [parse_json(line) for line in result.stdout.splitlines() if line.strip()]
    by_call = {line["call"]: line for line in lines if isinstance(line, dict) and "call" in line}
    return result._replace(json=by_call if len(by_call) == len(lines) else None)


def run_anthropic_sdk(node, base_url, api_key, model, stream=False, **options):
    """@anthropic-ai/sdk messages.create (stream=True: messages.stream)."""
    return run_sdk(node, base_url, api_key, ["anthropic_stream" if stream else "anthropic"],
                   model, **options)


def run_openai_responses(node, base_url, api_key, model, stream=False, **options):
    """openai responses.create, streamed or not."""
    return run_sdk(node, base_url, api_key, ["responses_stream" if stream else "responses"],
                   model, **options)
