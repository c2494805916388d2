"""Training from the frozen lower layers computed once trains the same adapter as the earlier path.

``cache_lower_layers`` (the default) runs only the LoRA layers at each step, from states the
frozen layers below gave once per book (:mod:`searchtome.baselines.generative.lower`). Both
paths train here side by side from the same seed, LoRA dropout on, in float32, and must give
the same loss curve to 1e-6 and the same adapter weights to 1e-5 (weights are 0.2-0.6 here).
The lower layers' states come from other batch shapes, which round differently: measured on
this CPU, loss curves equal to the last digit and weights within 1.5e-6 after 6 AdamW steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import (  # noqa: F401
    build_tiny_llama,
    one_thread,
    smollm2_fixture,
    tiny_lm_fixture,
)

torch = pytest.importorskip("torch")

from searchtome.baselines.generative.adapters import build_examples  # noqa: E402
from searchtome.baselines.generative.books import book_context  # noqa: E402
from searchtome.baselines.generative.config import GenRetConfig  # noqa: E402
from searchtome.baselines.generative.engine import load_lm  # noqa: E402
from searchtome.baselines.generative.lower import adapted_from, lower_states  # noqa: E402
from searchtome.baselines.generative.train import (  # noqa: E402
    LoraSettings,
    TrainSettings,
    attach_lora,
    batch_loss_backward,
    lora_state,
    train,
)

from searchtome.dataset.loader import load  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CFG = GenRetConfig(dtype="float32", device="cpu", restricted="exclude")
TOL = 1e-6  # losses
WEIGHT_TOL = 1e-5  # adapter weights: AdamW normalises away the size of a rounding error


@pytest.fixture(scope="module")
def four_layer_lm(tiny_lm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with 4 layers: two frozen below two adapted ones."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny4") / "lm", tiny_lm_dir, layers=4)


def _setup(model: Path, data: Path, *, with_toc: bool = True, lora_layers: int = 2):
    one_thread()
    lm = load_lm(str(model), dtype="float32", device="cpu")
    ds = load(data)
    book = book_context(lm, ds, "alpha-bio", CFG, with_toc=with_toc, seed=0)
    attach_lora(lm, LoraSettings(r=4, alpha=8, layers=lora_layers, dropout=0.1), seed=5)
    # LoRA's B starts at zero; move it so that the adapter changes the forward pass at once.
    gen = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for name, param in lm.model.named_parameters():
            if "lora_B" in name:
                param.copy_(0.2 * torch.randn(param.shape, generator=gen))
    examples = build_examples(lm, ds, {book.book_id: book}, [book.book_id], CFG)
    return lm, book, examples


def _train(model: Path, data: Path, work: Path, settings: TrainSettings, with_toc: bool):
    lm, book, examples = _setup(model, data, with_toc=with_toc)
    report = train(
        lm,
        examples,
        {book.book_id: book.prefix_ids},
        settings,
        seed=3,
        evaluate=None,
        work_dir=work,
    )
    return lm, report


@pytest.mark.parametrize(
    ("adapt_toc", "group", "with_toc"),
    [(True, 0, True), (True, 1, True), (False, 0, True), (False, 0, False)],
    ids=["stair-adapted-toc", "stair-one-example-per-row", "stair-frozen-toc", "dsi"],
)
def test_cached_lower_layers_train_the_same_adapter(
    four_layer_lm, tiny_dataset, tmp_path, adapt_toc, group, with_toc
) -> None:
    # 16 training questions: batches of 5 (an uneven last one), packs of 2 (several forward
    # passes per batch), accumulation over 2 batches, 3 epochs.
    settings = TrainSettings(
        lr=2e-2, batch_size=5, pack=2, group=group, grad_accum=2, max_epochs=3,
        adapt_toc=adapt_toc, warmup_ratio=0.2,
    )  # fmt: skip
    runs = {}
    for cached in (False, True):
        s = TrainSettings(**{**settings.__dict__, "cache_lower_layers": cached})
        runs[cached] = _train(four_layer_lm, tiny_dataset, tmp_path / str(cached), s, with_toc)
    (old_lm, old), (new_lm, new) = runs[False], runs[True]
    assert adapted_from(new_lm) == 2  # the fast path really ran: layers 0-1 computed once
    assert new.steps == old.steps == 3 * 2
    old_curve = [row["train_loss"] for row in old.history]
    new_curve = [row["train_loss"] for row in new.history]
    assert new_curve == pytest.approx(old_curve, abs=TOL, rel=0)
    assert old_curve[-1] < old_curve[0]  # it trained: the comparison is not of two no-ops
    a, b = lora_state(old_lm), lora_state(new_lm)
    assert a.keys() == b.keys() and a
    for key in a:
        torch.testing.assert_close(b[key], a[key], atol=WEIGHT_TOL, rtol=0, msg=key)


def test_nothing_is_computed_once_with_lora_on_every_layer(four_layer_lm, tiny_dataset) -> None:
    lm, book, examples = _setup(four_layer_lm, tiny_dataset, lora_layers=0)
    assert adapted_from(lm) is None
    assert lower_states(lm, examples, {book.book_id: book.prefix_ids}) is None


@pytest.mark.slow
def test_one_step_on_smollm2_gives_the_same_loss_and_gradients(smollm2_dir, tiny_dataset) -> None:
    """The real model (30 layers, LoRA on the top 10, the ToC read by LoRA), one batch of 8."""
    lm, book, examples = _setup(smollm2_dir, tiny_dataset, lora_layers=10)
    lower = lower_states(lm, examples, {book.book_id: book.prefix_ids})
    assert lower is not None and lower.first == 20
    params = [p for p in lm.model.parameters() if p.requires_grad]
    lm.model.train()  # LoRA dropout on
    got = []
    for low in (None, lower):
        lm.model.zero_grad(set_to_none=True)
        torch.manual_seed(11)
        loss, _n = batch_loss_backward(lm, examples[:8], book.prefix_ids, None, pack=4, lower=low)
        got.append((loss, torch.cat([p.grad.reshape(-1) for p in params])))
    (loss_a, grad_a), (loss_b, grad_b) = got
    assert loss_b == pytest.approx(loss_a, abs=TOL, rel=0)
    torch.testing.assert_close(grad_b, grad_a, atol=1e-5, rtol=1e-4)
