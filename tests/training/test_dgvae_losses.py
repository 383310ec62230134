"""DG-VAE losses: KL maths, ALMC, cross-modality triplets, TSR wiring, stage/variant wiring,
per-term descent on the tiny configuration, and the two-modality toy
(docs/methods/dgvae.md T2–T5, T7)."""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Normal, kl_divergence

from reidcli.errors import ParameterError, UsageError
from reidcli.models.dgvae import DGVAE, dgvae_arch
from reidcli.synthetic.vi_toy import identity_patterns, make_vi_toy, vi_toy_batch
from reidcli.training.dgvae_losses import (
    LOSS_TERMS, VARIANTS, CrossModalityTriplets, DGVAEWeights, active_terms, almc,
    almc_logits, ambi_loss, batch_hard_indices, cmtl_loss, cross_modality_triplets,
    dgvae_step_loss, dgvae_terms, gmm_loss, mog_kl, mog_kl_mc, rec_loss, standard_gaussian_kl,
    term_weights, triplet_terms, tsr_plan)


@pytest.fixture(scope="module")
def toy_batch():
    """A shuffled P=4 × (K=2 visible + K=2 infrared) batch of the toy (16 images)."""
    toy = make_vi_toy(seed=0)
    batch = vi_toy_batch(toy, p=4, k=2, rng=np.random.default_rng(0))
    order = np.random.default_rng(1).permutation(len(batch))
    return batch.subset(order)


def _tiny_model(seed: int = 0) -> DGVAE:
    torch.manual_seed(seed)
    return DGVAE(dgvae_arch("tiny", 8, (32, 16)))


# --------------------------------------------------------------------------- T2 KL maths

def test_mog_kl_zero_only_at_the_component():
    m = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    zero = mog_kl(m.clone(), torch.zeros(3, 5), m)
    assert torch.equal(zero, torch.zeros(3))                                     # T2
    assert bool((mog_kl(m + 0.1, torch.zeros(3, 5), m) > 0).all())
    assert bool((mog_kl(m.clone(), torch.full((3, 5), -0.2), m) > 0).all())
    assert bool((mog_kl(m.clone(), torch.full((3, 5), 0.2), m) > 0).all())


def test_mog_kl_matches_monte_carlo_and_the_mc_estimator():
    g = torch.Generator().manual_seed(1)
    mu, m = torch.tensor([[1.5, -0.5, 2.0, 0.0]]), torch.tensor([[0.0, 0.5, 0.5, -1.0]])
    logvar = torch.tensor([[-1.0, 0.5, 0.0, -0.3]])
    analytic = float(mog_kl(mu, logvar, m))
    sigma = torch.exp(0.5 * logvar)
    d = mu + sigma * torch.randn(100_000, 4, generator=g)
    log_q = Normal(mu, sigma).log_prob(d).sum(dim=1)
    log_p = Normal(m, torch.ones_like(m)).log_prob(d).sum(dim=1)
    assert abs(float((log_q - log_p).mean()) - analytic) <= 0.01 * analytic      # T2
    mc = mog_kl_mc(d, logvar.expand_as(d), m.expand_as(d))
    assert abs(float(mc.mean()) - 4 / 2 - analytic) <= 0.01 * analytic


def test_gmm_loss_uses_each_image_s_own_component():
    g = torch.Generator().manual_seed(2)
    means = torch.randn(4, 3, generator=g)
    mu, logvar = torch.randn(5, 3, generator=g), 0.3 * torch.randn(5, 3, generator=g)
    labels = torch.tensor([3, 0, 0, 2, 1])
    expected = np.mean([float(kl_divergence(Normal(mu[i], torch.exp(0.5 * logvar[i])),
                                            Normal(means[y], torch.ones(3))).sum())
                        for i, y in enumerate(labels.tolist())])
    assert float(gmm_loss(mu, logvar, mu, labels, means)) == pytest.approx(expected, rel=1e-5)


def test_ambi_is_twice_the_standard_gaussian_kl():
    g = torch.Generator().manual_seed(3)
    mu, logvar = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    reference = kl_divergence(Normal(mu, torch.exp(0.5 * logvar)),
                              Normal(torch.zeros(4), torch.ones(4))).sum(dim=1)
    torch.testing.assert_close(standard_gaussian_kl(mu, logvar), reference)
    assert float(ambi_loss(mu, logvar)) == pytest.approx(2 * float(reference.mean()), rel=1e-5)
    assert float(ambi_loss(torch.zeros(6, 4), torch.zeros(6, 4))) == 0.0         # T2


# --------------------------------------------------------------------------- T3 ALMC

def _hand_almc(d, logvar, y, means, alpha, form="component", mu=None, per_dim=False):
    n = len(d) if per_dim else 1
    logits = [-sum((di - mi) ** 2 for di, mi in zip(d, m)) / n for m in means]
    if form == "component":                    # ‖d − μ_y‖² + α_y (D2)
        target = sum((di - mi) ** 2 for di, mi in zip(d, means[y])) / n + alpha[y]
    elif form == "posterior_var":              # Σ (d − μ_y)²/σ² + α_y
        target = sum((di - mi) ** 2 / math.exp(lv)
                     for di, mi, lv in zip(d, means[y], logvar)) / n + alpha[y]
    else:                                      # Eq. 8 as printed: Σ (d − μ_φ)²/σ − α_y
        target = sum((di - mi) ** 2 / math.exp(0.5 * lv)
                     for di, mi, lv in zip(d, mu, logvar)) / n - alpha[y]
    logits[y] = -target
    return -logits[y] + math.log(sum(math.exp(z) for z in logits))


@pytest.mark.parametrize("form, per_dim", [("component", False), ("posterior_var", False),
                                           ("printed", False), ("component", True)])
def test_almc_equals_the_cross_entropy_by_hand(form, per_dim):
    means = [[0.0, 0.0], [1.0, 0.5], [-1.0, 1.0]]
    d = [[0.3, 0.2], [0.2, 0.9]]
    mu = [[0.1, 0.4], [0.5, 0.6]]
    logvar = [[0.5, -0.5], [0.0, 0.3]]
    labels, alpha = [0, 2], [1.0, 0.2, 0.7]
    ce, reg = almc(torch.tensor(d), torch.tensor(logvar), torch.tensor(labels),
                   torch.tensor(means), torch.tensor(alpha), form, mu=torch.tensor(mu),
                   per_dim=per_dim)
    by_hand = np.mean([_hand_almc(d[i], logvar[i], labels[i], means, alpha, form, mu[i],
                                  per_dim) for i in range(2)])
    assert float(ce) == pytest.approx(by_hand, rel=1e-6)                         # T3
    assert float(reg) == pytest.approx(-(1.0 + 0.7) / 2)                         # batch ids 0, 2
    logits = almc_logits(torch.tensor(d), torch.tensor(logvar), torch.tensor(labels),
                         torch.tensor(means), torch.tensor(alpha), form, torch.tensor(mu),
                         per_dim)
    assert float(logits[0, 1]) == pytest.approx(-(0.7 ** 2 + 0.3 ** 2) / (2 if per_dim else 1))


def test_printed_almc_form_is_eq_8_and_ignores_the_component():
    """Eq. 8 as printed: D_M = (d − μ_φ)ᵀ σ⁻¹ (d − μ_φ) − α_y, which for d = μ_φ + σ ⊙ ε is
    Σ σ ε² − α_y whatever μ_y is (why it is not the default, D2)."""
    g = torch.Generator().manual_seed(3)
    mu, logvar = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    eps = torch.randn(4, 3, generator=g)
    d = mu + torch.exp(0.5 * logvar) * eps
    labels, alpha = torch.tensor([0, 1, 2, 0]), torch.tensor([0.3, 0.5, 0.7])
    means = torch.randn(3, 3, generator=g)
    logits = almc_logits(d, logvar, labels, means, alpha, "printed", mu)
    expected = (torch.exp(0.5 * logvar) * eps ** 2).sum(dim=1) - alpha[labels]
    torch.testing.assert_close(-logits[torch.arange(4), labels], expected)
    moved = almc_logits(d, logvar, labels, means + 5.0, alpha, "printed", mu)
    torch.testing.assert_close(moved[torch.arange(4), labels], logits[torch.arange(4), labels])
    with pytest.raises(UsageError, match="μ_φ"):
        almc_logits(d, logvar, labels, means, alpha, "printed")
    with pytest.raises(ParameterError, match="lmc_form"):
        DGVAEWeights(lmc_form="eq9")


def test_larger_margin_makes_the_target_harder():
    g = torch.Generator().manual_seed(4)
    d, logvar = torch.randn(4, 3, generator=g), torch.zeros(4, 3)
    means, labels = torch.randn(3, 3, generator=g), torch.tensor([0, 1, 2, 0])
    low, _ = almc(d, logvar, labels, means, torch.full((3,), 0.5))
    high, _ = almc(d, logvar, labels, means, torch.full((3,), 2.0))
    assert float(high) > float(low)                                              # T3


def test_margin_grows_when_every_sample_is_classified():
    means = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    labels = torch.tensor([0, 2, 2])
    d = means[labels] + 0.01
    rho = torch.nn.Parameter(torch.full((3,), 0.5413))
    ce, reg = almc(d, torch.zeros(3, 2), labels, means, F.softplus(rho))
    assert float(ce.detach()) < 1e-6                                             # p_y ≈ 1
    (ce + 0.01 * reg).backward()
    assert float(rho.grad[0]) < 0 and float(rho.grad[2]) < 0                     # T3
    assert float(rho.grad[1]) == 0.0                                             # not in batch


# --------------------------------------------------------------------------- T4 triplets

def test_every_image_anchors_one_cross_modality_triplet(toy_batch):
    features = torch.randn(len(toy_batch), 16, generator=torch.Generator().manual_seed(5))
    labels, infrared = toy_batch.labels, toy_batch.infrared
    for mining in ("hard", "random"):
        t = cross_modality_triplets(features, labels, infrared, mining,
                                    torch.Generator().manual_seed(6))
        assert len(t) == 2 * 4 * 2                                               # 2PK
        assert torch.equal(t.anchor, torch.arange(16))
        assert torch.equal(labels[t.positive], labels[t.anchor])                 # T4
        assert torch.equal(infrared[t.positive], ~infrared[t.anchor])
        assert bool((labels[t.negative] != labels[t.anchor]).all())
        assert torch.equal(infrared[t.negative], ~infrared[t.anchor])


def test_batch_hard_picks_farthest_positive_and_closest_negative():
    dist = torch.tensor([[0.0, 0.4, 0.9, 0.3],
                         [0.4, 0.0, 0.2, 0.8],
                         [0.9, 0.2, 0.0, 0.5],
                         [0.3, 0.8, 0.5, 0.0]])
    positive = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 1], [0, 0, 1, 0]]).bool()
    negative = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 1], [0, 1, 0, 0], [1, 1, 0, 0]]).bool()
    far, near = batch_hard_indices(dist, positive, negative)
    assert far.tolist() == [2, 0, 0, 2]                                          # T4
    assert near.tolist() == [3, 2, 1, 0]


def test_hard_mining_uses_normalised_features():
    # 2 ids × (visible, infrared) ×2; anchor 0 (id 0, visible): positives 4, 5 (id 0, IR)
    feats = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.2],
                          [10.0, 1.0], [0.0, 0.3], [3.0, 0.1], [0.5, 0.5]])
    labels = torch.tensor([0, 0, 1, 1, 0, 0, 1, 1])
    infrared = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]).bool()
    t = cross_modality_triplets(feats, labels, infrared)
    x = F.normalize(feats, dim=1)
    for i, (p, n) in enumerate(zip(t.positive.tolist(), t.negative.tolist())):
        pos = [j for j in range(8) if labels[j] == labels[i] and infrared[j] != infrared[i]]
        neg = [j for j in range(8) if labels[j] != labels[i] and infrared[j] != infrared[i]]
        assert p == max(pos, key=lambda j: float((x[i] - x[j]).norm()))
        assert n == min(neg, key=lambda j: float((x[i] - x[j]).norm()))
    assert t.positive[0] == 5 and t.negative[0] == 6


def test_triplet_terms_and_modality_means():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [2.0, 0.0]])
    t = CrossModalityTriplets(torch.tensor([0, 0, 3]), torch.tensor([1, 2, 2]),
                              torch.tensor([2, 1, 1]))
    terms = triplet_terms(x, t, 0.1)
    expected = [max(0.0, math.sqrt(2) - 2 + 0.1), 2 - math.sqrt(2) + 0.1, 2 - math.sqrt(2) + 0.1]
    torch.testing.assert_close(terms, torch.tensor(expected))
    infrared = torch.tensor([False, True, False, True])                         # anchors V, V, I
    loss = cmtl_loss(x, x, t, infrared, 0.1, aux=0.0)
    assert float(loss) == pytest.approx((expected[0] + expected[1]) / 2 + expected[2])
    assert float(cmtl_loss(x, x, t, infrared, 0.1, aux=0.1)) == pytest.approx(1.1 * float(loss))


def test_no_triplet_is_a_usage_error():
    with pytest.raises(UsageError, match="no cross-modality triplet"):
        cross_modality_triplets(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]),
                                torch.tensor([False, False, False, False]))


# --------------------------------------------------------------------------- T5 TSR wiring

def test_tsr_plan_pairs_and_targets(toy_batch):
    labels, infrared = toy_batch.labels, toy_batch.infrared
    t = cross_modality_triplets(torch.randn(16, 8, generator=torch.Generator().manual_seed(7)),
                                labels, infrared)
    plan = tsr_plan(t, labels, infrared)
    idi, iai = plan.rec_sources()
    swap = plan.rec_swap
    assert int((~swap).sum()) == 16 and torch.equal(idi[~swap], torch.arange(16))
    got = set(zip(idi[swap].tolist(), iai[swap].tolist(), plan.rec_target[swap].tolist()))
    want = {(p, a, a) for a, p in zip(t.anchor.tolist(), t.positive.tolist())}
    want |= {(a, p, p) for a, p in zip(t.anchor.tolist(), t.positive.tolist())}
    assert got == want and int(swap.sum()) == 2 * len(t)                         # T5
    # a target is always rebuilt from its own IAI and an IDI code of its own identity:
    assert torch.equal(iai, plan.rec_target)                                     # no negative
    assert torch.equal(labels[idi], labels[plan.rec_target])
    assert torch.equal(plan.rec_target_infrared, infrared[plan.rec_target])
    assert len(plan.cyc_pair) == 9 * 16                                          # 9 · 2PK
    assert torch.equal(plan.idc_labels, labels[plan.cyc_idi])
    assert torch.equal(plan.pairs[plan.cyc_pair, 0], plan.cyc_idi)
    assert torch.equal(plan.pairs[plan.cyc_pair, 1], plan.cyc_iai)
    members = torch.stack([t.anchor, t.positive, t.negative])
    combos = set(zip(plan.cyc_iai.tolist(), plan.cyc_idi.tolist()))
    assert combos == {(int(members[u, k]), int(members[v, k]))
                      for k in range(len(t)) for u in range(3) for v in range(3)}
    assert len(tsr_plan(t, labels, infrared, "swap_only").cyc_pair) == 7 * 16


def test_reconstruction_targets_carry_no_gradient(toy_batch):
    labels, infrared = toy_batch.labels, toy_batch.infrared
    t = cross_modality_triplets(torch.randn(16, 8), labels, infrared)
    plan = tsr_plan(t, labels, infrared)
    maps = torch.randn(16, 2, 4, 4, requires_grad=True)
    recon = torch.randn(len(plan.pairs), 2, 4, 4, requires_grad=True)
    rec_loss(recon, maps, plan).backward()
    assert maps.grad is None and recon.grad is not None                          # T5
    assert float(recon.grad.abs().sum()) > 0


def test_tsr_terms_match_a_direct_computation(toy_batch):
    model = _tiny_model(1).eval()                   # eval: BN does not depend on the batch
    images, labels, infrared = toy_batch.images, toy_batch.labels, toy_batch.infrared
    variant, weights = VARIANTS["dgvae"], DGVAEWeights()
    got = dgvae_terms(model, images, labels, infrared, variant, weights,
                      ("rec", "cyc", "idc"), torch.Generator().manual_seed(8)).terms
    with torch.no_grad():                           # redo by hand with the same noise
        out = model(images, infrared)
        g = torch.Generator().manual_seed(8)
        d = out.mu_d + torch.exp(0.5 * out.logvar_d) * torch.randn(16, 16, generator=g)
        a = out.mu_a + torch.exp(0.5 * out.logvar_a) * torch.randn(16, 8, generator=g)
        t = cross_modality_triplets(out.mu_d, labels, infrared)

        def l1(x, y):
            return float((x - y).abs().mean())

        self_err = [l1(model.decode(d[i:i + 1], a[i:i + 1]), out.f[i:i + 1]) for i in range(16)]
        swaps = [(int(p), int(i), int(i)) for i, p in zip(t.anchor, t.positive)]
        swaps += [(int(i), int(p), int(p)) for i, p in zip(t.anchor, t.positive)]
        swap_err = [(l1(model.decode(d[s:s + 1], a[u:u + 1]), out.f[tg:tg + 1]), bool(infrared[tg]))
                    for s, u, tg in swaps]
        rec = (np.mean([e for e, ir in zip(self_err, infrared.tolist()) if not ir])
               + np.mean([e for e, ir in zip(self_err, infrared.tolist()) if ir])
               + np.mean([e for e, ir in swap_err if not ir])
               + np.mean([e for e, ir in swap_err if ir]))
        cyc, idc = [], []
        for k in range(len(t)):
            members = (int(t.anchor[k]), int(t.positive[k]), int(t.negative[k]))
            for u in members:
                for v in members:
                    f_hat = model.decode(d[v:v + 1], a[u:u + 1])
                    mu_d_hat, mu_a_hat = model.encode_idi(f_hat)[0], model.encode_iai(f_hat)[0]
                    cyc.append(l1(mu_a_hat, a[u:u + 1]) + l1(mu_d_hat, d[v:v + 1]))
                    idc.append(float(F.cross_entropy(model.classifier(mu_d_hat), labels[v:v + 1])))
    got = {k: float(v.detach()) for k, v in got.items()}
    assert got["rec"] == pytest.approx(rec, rel=1e-4)                            # T5
    assert got["cyc"] == pytest.approx(np.mean(cyc), rel=1e-4)
    assert got["idc"] == pytest.approx(np.mean(idc), rel=1e-4)


# --------------------------------------------------------------------------- stages, variants

def test_stage_terms_follow_the_schedule():
    w = DGVAEWeights()
    full = VARIANTS["dgvae"]
    assert active_terms(full, 1, w) == ("id", "cmtl", "gmm", "lmc", "lmc_alpha_reg")
    assert active_terms(full, 2, w) == ("ambi", "rec", "cyc", "idc")
    assert active_terms(full, 3, w) == tuple(t for t in LOSS_TERMS if t != "ambi_d")
    # row 10's N(0, I) prior on d acts where E^D trains: stages 1 and 3, not 2 (D28)
    vae2 = VARIANTS["vae2_tsr"]
    assert active_terms(vae2, 1, w) == ("id", "cmtl", "ambi_d")
    assert active_terms(vae2, 2, w) == ("ambi", "rec", "cyc", "idc")
    assert active_terms(vae2, 3, w) == ("id", "cmtl", "ambi", "ambi_d", "rec", "cyc", "idc")
    assert [term_weights(s, w)["ambi_d"] for s in (1, 3)] == [0.001, 0.01]
    assert "lmc_alpha_reg" not in active_terms(full, 3, DGVAEWeights(lmc_margin="fixed:1.5"))
    assert active_terms(VARIANTS["baseline"], 3, w) == ("id", "cmtl")
    assert active_terms(VARIANTS["ae_tsr"], 2, w) == ("rec",)
    assert VARIANTS["mog_lmc"].stages() == (1, 3) and full.stages() == (1, 2, 3)
    with pytest.raises(ParameterError, match="stage=2"):
        active_terms(VARIANTS["mog"], 2, w)
    assert sorted(v.table_row for v in VARIANTS.values()) == list(range(1, 13))
    with pytest.raises(ParameterError, match="lmc_margin"):
        DGVAEWeights(lmc_margin="fixed:-1")
    with pytest.raises(ParameterError, match="rec=-0.5"):
        DGVAEWeights(rec=-0.5)
    with pytest.raises(ParameterError, match="cyc_pairs='some'"):
        DGVAEWeights(cyc_pairs="some")
    converted = DGVAEWeights(rec="0.25", triplet_mining="Random")       # ``--set`` strings
    assert converted.rec == 0.25 and converted.triplet_mining == "random"


def test_step_total_is_the_weighted_sum_and_the_generator_drives_the_noise(toy_batch):
    model = _tiny_model(2)
    batch = (toy_batch.images, toy_batch.labels, toy_batch.infrared)
    weights = DGVAEWeights()
    for stage in (1, 2, 3):
        total, log = dgvae_step_loss(model, *batch, stage, VARIANTS["dgvae"], weights,
                                     torch.Generator().manual_seed(9))
        w = term_weights(stage, weights)
        terms = active_terms(VARIANTS["dgvae"], stage, weights)
        assert float(total.detach()) == pytest.approx(sum(w[t] * log[t] for t in terms), rel=1e-5)
        assert set(log) == set(terms) | {"alpha_mean", "sigma_d"} | (
            {"sigma_a"} if stage > 1 else set())
        total.backward()
    _, again = dgvae_step_loss(model.eval(), *batch, 3, VARIANTS["dgvae"], weights,
                               torch.Generator().manual_seed(9))
    _, same = dgvae_step_loss(model, *batch, 3, VARIANTS["dgvae"], weights,
                              torch.Generator().manual_seed(9))
    _, other = dgvae_step_loss(model, *batch, 3, VARIANTS["dgvae"], weights,
                               torch.Generator().manual_seed(10))
    assert again == same and again["lmc"] != other["lmc"]


def test_grad_norms_are_each_terms_gradient_on_the_encoders(toy_batch):
    """grad_norms=true adds gradnorm_<term> = ‖∂(w_t term_t)/∂θ_{E^D, E^A}‖ (here checked by
    hand for L_gmm and L_lmc), leaves the total and the terms unchanged; off: no such key."""
    batch = (toy_batch.images, toy_batch.labels, toy_batch.infrared)
    model = _tiny_model(3)
    for name, p in model.named_parameters():                      # stage 1's trainable set
        p.requires_grad_(not name.startswith(("iai_encoder", "decoder")))
    plain = DGVAEWeights()
    on = DGVAEWeights(grad_norms="true")
    total, log = dgvae_step_loss(model, *batch, 1, VARIANTS["dgvae"], on,
                                 torch.Generator().manual_seed(5))
    total_off, log_off = dgvae_step_loss(model, *batch, 1, VARIANTS["dgvae"], plain,
                                         torch.Generator().manual_seed(5))
    assert float(total.detach()) == float(total_off.detach())
    terms = active_terms(VARIANTS["dgvae"], 1, plain)
    assert set(log) == set(log_off) | {f"gradnorm_{t}" for t in terms}
    assert not [k for k in log_off if k.startswith("gradnorm_")]
    assert all(math.isfinite(log[f"gradnorm_{t}"]) for t in terms)
    result = dgvae_terms(model, *batch, VARIANTS["dgvae"], plain, terms,
                         torch.Generator().manual_seed(5))
    params = list(model.idi_encoder.parameters())
    w = term_weights(1, plain)
    for term in ("gmm", "lmc"):
        grads = torch.autograd.grad(w[term] * result.terms[term], params, retain_graph=True)
        norm = float(torch.sqrt(sum(g.pow(2).sum() for g in grads)))
        assert log[f"gradnorm_{term}"] == pytest.approx(norm, rel=1e-5)
    assert log["gradnorm_lmc_alpha_reg"] == 0.0                   # acts on ρ only


def _weighted_grad_norms(model, batch, weights):
    """{term: ‖∂(w_t term_t)/∂θ_{E^D}‖} of stage 1 at the model's current parameters."""
    for name, p in model.named_parameters():
        p.requires_grad_(not name.startswith(("iai_encoder", "decoder")))
    _, log = dgvae_step_loss(model, *batch, 1, VARIANTS["dgvae"],
                             dataclasses.replace(weights, grad_norms=True),
                             torch.Generator().manual_seed(0))
    return {k.removeprefix("gradnorm_"): v for k, v in log.items() if k.startswith("gradnorm_")}


def test_disc_terms_stay_on_the_task_scale_at_initialisation(toy_batch):
    """At initialisation σ = 1 (zero log-variance head, D14) and the default ALMC target
    ‖d − μ_y‖² + α_y (D2) does not involve σ: L_gmm's and L_lmc's weighted gradient norms on
    E^D stay within 10× of the task terms' (L_id + L_cmtl). With the log-variances at the
    clamp's lower end (log σ² = −10, where ResNet-50's default-initialised head sent some of
    them, issue 30) the form used before (σ⁻²) grows by orders of magnitude; ours does not."""
    batch = (toy_batch.images, toy_batch.labels, toy_batch.infrared)
    model = _tiny_model(4)
    for encoder in (model.idi_encoder, model.iai_encoder):
        assert not encoder.logvar_head.weight.any() and not encoder.logvar_head.bias.any()
    norms = _weighted_grad_norms(model, batch, DGVAEWeights())
    task = norms["id"] + norms["cmtl"]
    assert 0 < norms["gmm"] < 10 * task and 0 < norms["lmc"] < 10 * task
    with torch.no_grad():
        model.idi_encoder.logvar_head.bias.fill_(-10.0)           # σ² = e⁻¹⁰ everywhere
    ours = _weighted_grad_norms(model, batch, DGVAEWeights())
    before = _weighted_grad_norms(model, batch, DGVAEWeights(lmc_form="posterior_var",
                                                             disc_scale="sum"))
    assert ours["lmc"] < 10 * task
    assert before["lmc"] > 1000 * task
    summed = _weighted_grad_norms(model, batch, DGVAEWeights(disc_scale="sum"))
    assert summed["lmc"] < 10 * task                              # σ-free also when summed
    l = model.arch.idi_dim
    assert ours["gmm"] == pytest.approx(summed["gmm"] / l, rel=1e-4)    # L_gmm / l (D30)


def test_variants_without_sampling_are_deterministic(toy_batch):
    model = _tiny_model(3).eval()
    batch = (toy_batch.images, toy_batch.labels, toy_batch.infrared)
    for name in ("baseline", "ae_tsr"):
        logs = [dgvae_step_loss(model, *batch, 3, VARIANTS[name], DGVAEWeights(),
                                torch.Generator().manual_seed(s))[1] for s in (0, 1)]
        assert logs[0] == logs[1]
    with torch.no_grad():
        vae2 = dgvae_terms(model, *batch, VARIANTS["vae2_tsr"], DGVAEWeights(),
                           ("ambi", "ambi_d")).terms
        vae1 = dgvae_terms(model, *batch, VARIANTS["vae1_tsr"], DGVAEWeights(), ("ambi",)).terms
        out = model(*batch[0:1], batch[2])
    assert float(vae2["ambi"]) == pytest.approx(float(vae1["ambi"]), rel=1e-6)
    assert float(vae2["ambi_d"]) == pytest.approx(float(ambi_loss(out.mu_d, out.logvar_d)),
                                                  rel=1e-5)


@pytest.mark.parametrize("update", [False, True])
def test_reconstructions_move_bn_running_statistics_only_when_the_switch_says_so(toy_batch,
                                                                                 update):
    """D29: a stage-3 step re-encodes ~9 reconstructions per triplet through E^D and E^A;
    by default their BN running statistics (and batch counts) are then exactly those of the
    real images' forward alone, and ``recon_bn_update=True`` lets the reconstructions in."""
    model = _tiny_model(5).train()
    alone = copy.deepcopy(model)
    batch = (toy_batch.images, toy_batch.labels, toy_batch.infrared)
    loss, _ = dgvae_step_loss(model, *batch, 3, VARIANTS["dgvae"],
                              DGVAEWeights(recon_bn_update=update),
                              torch.Generator().manual_seed(0))
    loss.backward()
    with torch.no_grad():
        alone(batch[0], batch[2])
    for encoder in ("idi_encoder", "iai_encoder"):
        pairs = zip(getattr(model, encoder).named_buffers(),
                    getattr(alone, encoder).buffers())
        same = {name: torch.equal(got, want) for (name, got), want in pairs}
        assert all(same.values()) != update, (encoder, same)
    assert DGVAEWeights(recon_bn_update="true").recon_bn_update is True     # --set text
    with pytest.raises(ParameterError, match="recon_bn_update"):
        DGVAEWeights(recon_bn_update="sometimes")


def test_kl_terms_stay_fp32_under_autocast(toy_batch):
    model = _tiny_model(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        terms = dgvae_terms(model, toy_batch.images, toy_batch.labels, toy_batch.infrared,
                            VARIANTS["dgvae"], DGVAEWeights(), ("gmm", "lmc", "ambi"),
                            torch.Generator().manual_seed(0)).terms
    assert all(v.dtype == torch.float32 and bool(torch.isfinite(v)) for v in terms.values())


# --------------------------------------------------------------------------- T7 descent

#: mean(last 3) / mean(first 3) after 30 Adam steps on one term; worst of seeds 0–4:
#: id 0.33, cmtl 0.008, gmm 0.003, lmc 0.046 (per_dim ALMC, D30), ambi 0.006, rec 0.79,
#: cyc 0.74, idc 0.55
DESCENT_RATIO = {"id": 0.5, "cmtl": 0.05, "gmm": 0.05, "lmc": 0.1, "ambi": 0.05,
                 "rec": 0.85, "cyc": 0.85, "idc": 0.7}


def per_term_descent(term: str, seed: int, steps: int = 30) -> float:
    """mean(last 3) / mean(first 3) of ``term`` over ``steps`` Adam steps (lr 1e-3, every
    parameter trainable) on one fixed toy batch, fresh sampling noise at every step."""
    torch.manual_seed(seed)
    batch = vi_toy_batch(make_vi_toy(seed=seed), 4, 2, np.random.default_rng(seed))
    model = DGVAE(dgvae_arch("tiny", 8, (32, 16))).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    values = []
    for step in range(steps):
        noise = torch.Generator().manual_seed(10_000 * seed + step)
        loss = dgvae_terms(model, batch.images, batch.labels, batch.infrared, VARIANTS["dgvae"],
                           DGVAEWeights(), (term,), noise).terms[term]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        values.append(float(loss.detach()))
    return float(np.mean(values[-3:]) / np.mean(values[:3]))


@pytest.mark.parametrize("term", sorted(DESCENT_RATIO))
def test_each_term_descends_alone(term):
    ratio = per_term_descent(term, seed=0)
    assert ratio <= min(0.9, DESCENT_RATIO[term])                                # T7


# --------------------------------------------------------------------------- toy

def test_toy_layout_and_polarity():
    toy = make_vi_toy(num_ids=8, per_id=8, pattern_seed=0, seed=0)
    assert toy.images.shape == (128, 3, 32, 16) and toy.images.dtype == torch.float32
    assert toy.labels.dtype == torch.int64
    assert toy.labels.tolist() == [i // 8 for i in range(64)] * 2
    assert toy.infrared.tolist() == [False] * 64 + [True] * 64
    assert -0.4 < float(toy.images.min()) and float(toy.images.max()) < 1.4
    ir = toy.images[toy.infrared]
    torch.testing.assert_close(ir[:, 0], ir[:, 2])                              # grey
    patterns = torch.from_numpy(identity_patterns(8, 0)).float()
    unshifted = patterns[toy.labels] - patterns[toy.labels].mean(dim=(1, 2), keepdim=True)
    grey = toy.images.mean(dim=1)
    corr = ((grey - grey.mean(dim=(1, 2), keepdim=True)) * unshifted).sum(dim=(1, 2))
    assert float((corr[~toy.infrared] > 0).float().mean()) > 0.9                # bright pattern
    assert float((corr[toy.infrared] < 0).float().mean()) > 0.9                 # inverted
    same = make_vi_toy(seed=0)
    closed, other = make_vi_toy(seed=1), make_vi_toy(pattern_seed=1, seed=0)
    assert torch.equal(same.images, toy.images) and not torch.equal(closed.images, toy.images)
    assert not np.array_equal(identity_patterns(8, 1), identity_patterns(8, 0))
    assert not torch.equal(other.images, toy.images)


def test_toy_batch_is_cross_modality_pk():
    toy = make_vi_toy(num_ids=6, per_id=3)
    batch = vi_toy_batch(toy, p=4, k=2, rng=np.random.default_rng(3))
    assert batch.infrared.tolist() == [False] * 8 + [True] * 8
    assert torch.equal(batch.labels[:8], batch.labels[8:])
    assert len(set(batch.labels.tolist())) == 4
    assert all(batch.labels.tolist().count(y) == 4 for y in set(batch.labels.tolist()))
    with pytest.raises(ParameterError, match="p=7"):
        vi_toy_batch(toy, p=7, k=2)
