// Mixed precision: the autocast guards, float32 losses under autocast, every built-in extractor
// training in bfloat16 on the CPU with float32 weights and gradients, and the gradient scaler.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <fstream>
#include <string>

#include "models/attention.h"
#include "oml/common/autocast.h"
#include "oml/common/cpu_features.h"
#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/precision.h"
#include "oml/io/checkpoint.h"
#include "oml/losses/arcface.h"
#include "oml/losses/miners.h"
#include "oml/losses/surrogate_precision.h"
#include "oml/losses/triplet_loss.h"
#include "oml/models/extractor.h"
#include "oml/optim/grad_scaler.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"
#include "torch_compat.h"

namespace precision_tests {

using Catch::Matchers::Contains;
using oml::AutocastGuard;
using oml::Float32Guard;
using oml::config::Precision;

namespace {
// LibTorch's own CPU autocast state, through torch_compat (1.13 and 2.x name it differently).
bool cpu_autocast_enabled() { return oml::torch_compat::autocast_enabled(c10::DeviceType::CPU); }
c10::ScalarType cpu_autocast_dtype() { return oml::torch_compat::autocast_dtype(c10::DeviceType::CPU); }

std::shared_ptr<oml::models::Extractor> build_extractor(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("extractor: " + yaml, "model.yaml");
  return oml::registries().extractors.create(
      oml::config::parse_component(doc.root()["extractor"], "extractor"));
}

std::shared_ptr<oml::losses::Criterion> build_loss(const std::string& yaml, int64_t dim, int64_t classes) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("criterion: " + yaml, "loss.yaml");
  oml::losses::CriterionContext context;
  context.embedding_size = dim;
  context.num_classes = classes;
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         context);
}
}  // namespace

TEST_CASE("An AutocastGuard runs a conv net's forward in bfloat16 and restores autocast at exit",
          "[precision]") {
  torch::manual_seed(0);
  auto model = build_extractor("{name: conv_net, args: {in_channels: 3, channels: [8, 16], feat_dim: 16}}");
  const auto images = torch::randn({4, 3, 28, 28});
  REQUIRE_FALSE(cpu_autocast_enabled());
  at::Tensor inside;
  {
    const AutocastGuard autocast(Precision::bf16, torch::kCPU);
    CHECK(autocast.active());
    CHECK(autocast.dtype() == torch::kBFloat16);
    CHECK(cpu_autocast_enabled());
    CHECK(cpu_autocast_dtype() == torch::kBFloat16);
    // A convolution is on autocast's lower-precision list: its result is bfloat16 although
    // input and weights are float32.
    const auto weight = torch::randn({8, 3, 3, 3});
    CHECK(torch::conv2d(images, weight).scalar_type() == torch::kBFloat16);
    inside = model->forward(images);
  }
  CHECK(inside.scalar_type() == torch::kBFloat16);
  CHECK_FALSE(cpu_autocast_enabled());
  for (const auto& p : model->parameters()) CHECK(p.scalar_type() == torch::kFloat);  // weights untouched
  const auto outside = model->forward(images);
  CHECK(outside.scalar_type() == torch::kFloat);
  // bfloat16 keeps ~3 significant digits: the same embeddings, not the same bits.
  CHECK(torch::allclose(inside.to(torch::kFloat), outside, /*rtol=*/5e-2, /*atol=*/5e-2));
  CHECK_FALSE(torch::equal(inside.to(torch::kFloat), outside));

  // precision 32 is no autocast at all.
  {
    const AutocastGuard off(Precision::fp32, torch::kCPU);
    CHECK_FALSE(off.active());
    CHECK_FALSE(cpu_autocast_enabled());
    CHECK(model->forward(images).scalar_type() == torch::kFloat);
  }
}

TEST_CASE("Autocast guards nest: a Float32Guard inside bf16 computes in float32, the outer state returns",
          "[precision]") {
  const auto a = torch::randn({5, 7});
  const auto b = torch::randn({7, 3});
  const AutocastGuard outer(Precision::bf16, torch::kCPU);
  CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
  {
    const Float32Guard float32;
    CHECK_FALSE(cpu_autocast_enabled());
    CHECK(torch::mm(a, b).scalar_type() == torch::kFloat);
    {
      const AutocastGuard inner(Precision::bf16, torch::kCPU);
      CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
    }
    CHECK_FALSE(cpu_autocast_enabled());
  }
  CHECK(cpu_autocast_enabled());
  CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
}

TEST_CASE("precision 16 on the CPU is a config error that names bf16", "[precision]") {
  CHECK_THROWS_AS(AutocastGuard(Precision::fp16, torch::kCPU), oml::ConfigError);
  CHECK_THROWS_WITH(AutocastGuard(Precision::fp16, torch::kCPU), Contains("use precision: bf16"));
  CHECK_FALSE(cpu_autocast_enabled());
}

TEST_CASE("The built-in losses compute in float32 under bf16 autocast", "[precision][losses]") {
  torch::manual_seed(1);
  const int64_t dim = 16;
  // What a bf16 extractor hands the loss: bfloat16 embeddings.
  const auto embeddings = torch::nn::functional::normalize(
                              torch::randn({16, dim}), torch::nn::functional::NormalizeFuncOptions().dim(1))
                              .to(torch::kBFloat16);
  const auto labels = torch::arange(4).repeat_interleave(4);
  for (const std::string yaml :
       {"{name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}",
        "{name: triplet_with_miner, args: {margin: null, miner: {name: all_triplets}}}",
        "{name: arcface, args: {m: 0.4, s: 64}}", "{name: surrogate_precision, args: {k: 3}}"}) {
    INFO(yaml);
    torch::manual_seed(2);
    auto loss = build_loss(yaml, dim, 4);
    torch::manual_seed(5);  // miners may sample triplets: the same ones both times
    const auto reference = loss->forward(embeddings.to(torch::kFloat), labels);  // float32 throughout
    auto input = embeddings.detach().requires_grad_(true);
    oml::losses::LossOutput mixed;
    torch::manual_seed(5);
    {
      const AutocastGuard autocast(Precision::bf16, torch::kCPU);
      mixed = loss->forward(input, labels);
    }
    CHECK(mixed.loss.scalar_type() == torch::kFloat);
    // The same float32 computation on the same values: the same loss, not one rounded to bfloat16.
    CHECK(mixed.loss.item<double>() == Approx(reference.loss.item<double>()).epsilon(1e-6));
    mixed.loss.backward();
    REQUIRE(input.grad().defined());
    CHECK(input.grad().scalar_type() == torch::kBFloat16);  // flows back in the input's dtype
    CHECK(torch::isfinite(input.grad()).all().item<bool>());
    for (const auto& p : loss->parameters()) {
      CHECK(p.scalar_type() == torch::kFloat);
      if (p.grad().defined()) CHECK(p.grad().scalar_type() == torch::kFloat);
    }
  }
}

TEST_CASE("Every built-in extractor trains a step in bf16 with float32 weights and gradients",
          "[precision][models]") {
  for (const std::string yaml :
       {"{name: conv_net, args: {in_channels: 3, channels: [8, 16], feat_dim: 16}}",
        "{name: resnet, args: {arch: resnet18}}",
        "{name: extractor_with_mlp, args: {extractor: {name: conv_net, args: {in_channels: 3}}, "
        "mlp_features: [32, 16]}}"}) {
    INFO(yaml);
    torch::manual_seed(3);
    auto model = build_extractor(yaml);
    auto loss = build_loss("{name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}",
                           model->feat_dim(), 2);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
    model->train();
    const auto images = torch::randn({8, 3, 32, 32});
    const auto labels = torch::arange(2).repeat_interleave(4);
    oml::losses::LossOutput out;
    at::Tensor embeddings;
    {
      const AutocastGuard autocast(Precision::bf16, torch::kCPU);
      embeddings = model->forward(images);
      out = loss->forward(embeddings, labels);
    }
    CHECK(embeddings.scalar_type() == torch::kBFloat16);
    CHECK(out.loss.scalar_type() == torch::kFloat);
    CHECK(std::isfinite(out.loss.item<double>()));
    optimizer.zero_grad();
    out.loss.backward();
    int64_t with_grad = 0;
    for (const auto& p : model->parameters()) {
      CHECK(p.scalar_type() == torch::kFloat);
      if (!p.grad().defined()) continue;
      ++with_grad;
      CHECK(p.grad().scalar_type() == torch::kFloat);
      CHECK(torch::isfinite(p.grad()).all().item<bool>());
    }
    CHECK(with_grad > 0);
    optimizer.step();
    for (const auto& b : model->buffers()) CHECK(b.scalar_type() != torch::kBFloat16);  // BatchNorm stats
  }
}

TEST_CASE("Attention on the CPU follows its rule: fused as given, fused in float32 or written out",
          "[precision][models]") {
  using oml::models::detail::cpu_attention;
  using oml::models::detail::CpuAttention;
  using oml::models::detail::kWrittenOutMaxKeysAmd;
  using oml::models::detail::kWrittenOutMaxKeysAmx;
  using oml::models::detail::kWrittenOutMaxKeysIntel;
  using oml::models::detail::written_out_max_keys;
  for (const bool amx : {false, true}) {
    for (const bool amd : {false, true}) CHECK(written_out_max_keys(false, amx, amd) == 0);
  }
  CHECK(written_out_max_keys(true, true, false) == kWrittenOutMaxKeysAmx);
  CHECK(written_out_max_keys(true, false, true) == kWrittenOutMaxKeysAmd);
  CHECK(written_out_max_keys(true, false, false) == kWrittenOutMaxKeysIntel);
  // Every zoo ViT at 224 px is written out with AMX and on AMD: ViT/14 with registers has 261 tokens.
  CHECK(kWrittenOutMaxKeysAmx >= 261);
  CHECK(kWrittenOutMaxKeysAmd >= 261);
  const bool fused = oml::torch_compat::has_fused_attention;
  const bool packs = oml::torch_compat::cpu_flash_attention_packs(torch::kBFloat16);
  // Half is never written out.
  const auto half = oml::torch_compat::cpu_flash_attention_packs(torch::kHalf) ? CpuAttention::kFused
                                                                               : CpuAttention::kFusedInFloat;
  for (const int64_t max_keys : {int64_t{0}, int64_t{128}, int64_t{256}, int64_t{320}}) {
    for (const bool backward : {true, false}) {
      INFO("written out up to " << max_keys << " keys; backward " << backward);
      CHECK(cpu_attention(torch::kFloat, 10000, backward, max_keys) == CpuAttention::kFused);
      CHECK(cpu_attention(torch::kFloat, 4, backward, max_keys) == CpuAttention::kFused);
      if (!fused) {  // 1.13: the "fused" attention is written out there anyway
        CHECK(cpu_attention(torch::kBFloat16, 4, backward, max_keys) == CpuAttention::kFused);
        CHECK(cpu_attention(torch::kBFloat16, max_keys + 1, backward, max_keys) == CpuAttention::kFused);
        continue;
      }
      const auto beyond = packs ? CpuAttention::kFused : CpuAttention::kFusedInFloat;
      // Where the fused kernel packs bfloat16, its forward pass alone is the fastest.
      const auto within = (backward || !packs) ? CpuAttention::kWrittenOut : CpuAttention::kFused;
      CHECK(cpu_attention(torch::kBFloat16, 4, backward, max_keys) == (max_keys > 0 ? within : beyond));
      if (max_keys > 0) CHECK(cpu_attention(torch::kBFloat16, max_keys, backward, max_keys) == within);
      CHECK(cpu_attention(torch::kBFloat16, max_keys + 1, backward, max_keys) == beyond);
      CHECK(cpu_attention(torch::kHalf, 4, backward, max_keys) == half);
    }
  }
}

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
namespace {
// The value of /proc/cpuinfo's first `field` line (the first CPU's), with its leading space.
std::string cpuinfo_field(const std::string& field) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind(field, 0) == 0) return line.substr(line.find(':') + 1);
  }
  return "";
}
}  // namespace
#endif

TEST_CASE("The CPU's bfloat16 instructions read from CPUID are those Linux lists", "[precision]") {
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
  // /proc/cpuinfo's flags are the kernel's view: AVX-512 ones are left out where it does not
  // save their registers, which is the condition CPUID's reading checks too.
  const std::string flags = cpuinfo_field("flags") + " ";
  REQUIRE(flags.size() > 1);
  const bool listed = flags.find(" avx512_bf16 ") != std::string::npos;
  INFO(flags);
  CHECK(oml::cpu_has_bf16_dot_products() == listed);
  CHECK(oml::cpu_emulates_bf16() == !listed);
  // The kernel lists amx_bf16 only where it enables the tile state, which CPUID's reading checks.
  CHECK(oml::cpu_has_amx_bf16() == (flags.find(" amx_bf16 ") != std::string::npos));
#else
  CHECK_FALSE(oml::cpu_emulates_bf16());  // not known off x86: never a warning there
  CHECK_FALSE(oml::cpu_has_amx_bf16());
#endif
}

TEST_CASE("The CPU's vendor read from CPUID is the one Linux names", "[precision]") {
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
  const std::string vendor = cpuinfo_field("vendor_id");
  INFO("vendor_id:" << vendor);
  REQUIRE(!vendor.empty());
  CHECK(oml::cpu_is_amd() == (vendor.find("AuthenticAMD") != std::string::npos));
#else
  CHECK_FALSE(oml::cpu_is_amd());
#endif
}

TEST_CASE("Written-out attention equals the fused kernel, with a key mask and with gradients",
          "[precision][models]") {
  if (!oml::torch_compat::has_fused_attention) return;  // 1.13: the fused one is written out too
  torch::manual_seed(6);
  auto q = torch::randn({2, 3, 9, 8}, torch::kDouble).requires_grad_();
  auto k = torch::randn({2, 3, 9, 8}, torch::kDouble).requires_grad_();
  auto v = torch::randn({2, 3, 9, 8}, torch::kDouble).requires_grad_();
  const auto mask = torch::ones({2, 1, 1, 9}, torch::kBool);
  mask[1].slice(-1, 5).fill_(false);  // the second row's last 4 keys padding
  for (const auto& key_mask : {torch::Tensor(), mask}) {
    const auto written = oml::torch_compat::written_out_attention(q, k, v, key_mask, 0.0);
    const auto gw = torch::autograd::grad({written.sum()}, {q, k, v});
    const auto fused = oml::torch_compat::scaled_dot_product_attention(q, k, v, key_mask, 0.0);
    const auto gf = torch::autograd::grad({fused.sum()}, {q, k, v});
    CHECK(torch::allclose(written, fused, 1e-10, 1e-12));
    for (int i = 0; i < 3; ++i) CHECK(torch::allclose(gw[i], gf[i], 1e-9, 1e-12));
  }
}

TEST_CASE("Attention under CPU bf16 autocast runs the kernels its rule picks", "[precision][models]") {
  // q, k and v come out of bf16 projections; the attention itself runs as
  // oml::models::detail::cpu_attention says for their dtype and length on this CPU, with a
  // backward pass or without (written out in bf16 up to 128, 256 or 320 tokens where it has
  // AVX512-BF16, but with AMX only before a backward pass; otherwise the fused kernel in bf16
  // with AMX, else in float32). Written out with explicit casts, each way is
  // the same kernels as under autocast, so the results are equal exactly; a float32 attention
  // that autocast recast to bf16 would not be.
  using oml::models::detail::CpuAttention;
  torch::manual_seed(5);
  const int64_t tokens =
      GENERATE(int64_t{17}, int64_t{150}, int64_t{261}, oml::models::detail::kWrittenOutMaxKeysAmx + 3);
  INFO("tokens " << tokens);
  const int64_t batch = 2, dim = 24, heads = 3, head_dim = dim / heads;
  const auto x = torch::randn({batch, tokens, dim});
  const auto in_weight = torch::randn({3 * dim, dim}) * 0.3, in_bias = torch::randn({3 * dim}) * 0.1;
  const auto out_weight = torch::randn({dim, dim}) * 0.3, out_bias = torch::randn({dim}) * 0.1;
  const auto key_mask = torch::ones({batch, tokens}, torch::kLong);
  key_mask[1].slice(0, 12).zero_();  // the second row padded after 12 tokens
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  // The kernels `way` runs, with explicit casts in place of autocast's.
  const auto attend_as = [](CpuAttention way, const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& mask) {
    if (way == CpuAttention::kWrittenOut) return oml::torch_compat::written_out_attention(q, k, v, mask, 0.0);
    const auto dtype = way == CpuAttention::kFusedInFloat ? torch::kFloat : torch::kBFloat16;
    return oml::torch_compat::scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask, 0.0)
        .to(torch::kBFloat16);
  };
  // What the rule picks on this CPU, for attention with a backward pass or without.
  const auto attend = [&](bool backward, const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v, const torch::Tensor& mask) {
    return attend_as(oml::models::detail::cpu_attention(torch::kBFloat16, tokens, backward), q, k, v, mask);
  };
  const auto heads_of = [&](const torch::Tensor& t) {
    return t.view({batch, tokens, heads, head_dim}).transpose(1, 2);
  };

  SECTION("the vision transformers' self-attention") {
    const auto qkv = at::linear(bf16(x), bf16(in_weight), bf16(in_bias))
                         .reshape({batch, tokens, 3, heads, head_dim})
                         .permute({2, 0, 3, 1, 4});
    const auto expected_as = [&](bool backward) {
      return at::linear(attend(backward, qkv[0], qkv[1], qkv[2], torch::Tensor())
                            .transpose(1, 2)
                            .reshape({batch, tokens, dim}),
                        bf16(out_weight), bf16(out_bias));
    };
    const auto input = x.clone().requires_grad_();
    torch::Tensor out, inferred;
    {
      const AutocastGuard autocast(Precision::bf16, torch::kCPU);
      out = oml::models::detail::self_attention(input, in_weight, in_bias, out_weight, out_bias, heads);
      const torch::NoGradGuard no_grad;  // as oml-predict and validation run it
      inferred = oml::models::detail::self_attention(x, in_weight, in_bias, out_weight, out_bias, heads);
    }
    CHECK(out.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(out, expected_as(true)));
    CHECK(inferred.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(inferred, expected_as(false)));
    out.to(torch::kFloat).sum().backward();
    CHECK(input.grad().scalar_type() == torch::kFloat);
    CHECK(torch::isfinite(input.grad()).all().item<bool>());
  }
  SECTION("the text encoders' masked attention") {
    const auto q = bf16(torch::randn({batch, tokens, dim})), k = bf16(torch::randn({batch, tokens, dim})),
               v = bf16(torch::randn({batch, tokens, dim}));
    const auto mask = key_mask.ne(0).view({batch, 1, 1, tokens});
    // q, k and v need no gradient: the rule's choice without a backward pass.
    const auto expected = attend(false, heads_of(q), heads_of(k), heads_of(v), mask)
                              .transpose(1, 2)
                              .reshape({batch, tokens, dim});
    torch::Tensor out;
    {
      const AutocastGuard autocast(Precision::bf16, torch::kCPU);
      out = oml::models::detail::masked_attention(q, k, v, key_mask, heads, 0.0);
    }
    CHECK(out.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(out, expected));
  }
  SECTION("each way of the rule, chosen explicitly (whatever this CPU's rule picks)") {
    const auto q = bf16(heads_of(torch::randn({batch, tokens, dim}))),
               k = bf16(heads_of(torch::randn({batch, tokens, dim}))),
               v = bf16(heads_of(torch::randn({batch, tokens, dim})));
    const auto mask = key_mask.ne(0).view({batch, 1, 1, tokens});
    for (const auto way : {CpuAttention::kFused, CpuAttention::kFusedInFloat, CpuAttention::kWrittenOut}) {
      INFO("way " << static_cast<int>(way));
      const auto expected = attend_as(way, q, k, v, mask);
      torch::Tensor out;
      {
        const AutocastGuard autocast(Precision::bf16, torch::kCPU);
        out = oml::models::detail::attend(q, k, v, mask, 0.0, way);
      }
      CHECK(out.scalar_type() == torch::kBFloat16);
      CHECK(torch::equal(out, expected));
    }
  }
}

TEST_CASE("The gradient scaler skips steps with non-finite gradients, backs off and grows",
          "[precision][optim]") {
  oml::optim::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  oml::optim::GradScaler scaler(options);
  auto w = torch::ones({3}, torch::requires_grad());
  const auto loss = (w * torch::tensor({1.0f, 2.0f, 3.0f})).sum();
  const auto scaled = scaler.scale(loss);
  CHECK(scaled.item<double>() == Approx(6.0 * 1024));
  scaled.backward();
  CHECK(w.grad()[2].item<double>() == Approx(3.0 * 1024));
  CHECK(scaler.unscale({w}));
  CHECK(torch::allclose(w.grad(), torch::tensor({1.0f, 2.0f, 3.0f})));
  scaler.update();
  CHECK(scaler.current_scale() == 1024);  // one clean step of the two growth needs

  w.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 0.0f});
  CHECK_FALSE(scaler.unscale({w}));
  CHECK(scaler.skipped_steps() == 1);
  scaler.update();
  CHECK(scaler.current_scale() == 512);  // backoff 0.5, and the growth count restarts

  for (int i = 0; i < 2; ++i) {
    w.mutable_grad() = torch::ones({3});
    CHECK(scaler.unscale({w}));
    scaler.update();
  }
  CHECK(scaler.current_scale() == 1024);  // growth 2 after growth_interval clean steps
  CHECK(scaler.skipped_steps() == 1);
}

TEST_CASE("A fused optimizer given the scaler's found_inf skips on the device, and settles its step counts",
          "[precision][optim]") {
  // The Trainer's way with precision 16 and `fused: true` (as torch.amp.GradScaler.step with a
  // fused optimizer): unscale_in_place, skip_next_step_if(found_inf), step() — never a read.
  // On the CPU the same kernels run, so the decisions are checked here.
  if (!oml::optim::fused_kernels_available()) return;  // LibTorch 1.13: no fused kernels
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(
      "adam: {name: adam, args: {lr: 0.01, fused: true}}\n"
      "sgd: {name: sgd, args: {lr: 0.01, momentum: 0.9, fused: true}}\n",
      "optim.yaml");
  const float inf = std::numeric_limits<float>::infinity();
  // The first step overflowing (a state made by a skipped step) or the second.
  for (const auto& [name, poisoned] :
       {std::pair<const char*, std::size_t>{"adam", 0}, {"adam", 1}, {"sgd", 0}, {"sgd", 1}}) {
    INFO(name << ", step " << poisoned + 1 << " overflows");
    torch::manual_seed(4);
    const std::vector<at::Tensor> start{torch::randn({5, 3}), torch::randn({3})};
    std::vector<std::vector<at::Tensor>> grads(4);
    for (auto& g : grads) {
      for (const auto& p : start) g.push_back(torch::randn(p.sizes()) * 1024);  // scaled gradients
    }
    grads[poisoned][1][0] = inf;
    const auto make = [&](std::vector<at::Tensor>& params) {
      params.clear();
      for (const auto& p : start) params.push_back(p.clone().requires_grad_(true));
      return oml::registries().optimizers.create(oml::config::parse_component(doc.root()[name], name),
                                                 oml::optim::OptimizerContext{params, {}});
    };
    // On the device: every step taken, the poisoned one skipped by the kernel.
    std::vector<at::Tensor> params;
    const auto opt = make(params);
    auto* skipping = dynamic_cast<oml::optim::DeviceSkipping*>(opt.get());
    REQUIRE(skipping != nullptr);
    REQUIRE(skipping->skips_on_device());
    oml::optim::GradScalerOptions options;
    options.init_scale = 1024;
    oml::optim::GradScaler scaler(options);
    (void)scaler.scale(torch::zeros({}));  // the scale's device
    for (std::size_t s = 0; s < grads.size(); ++s) {
      std::vector<at::Tensor> before;
      for (const auto& p : params) before.push_back(p.detach().clone());
      for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[s][i].clone();
      scaler.unscale_in_place(params);
      skipping->skip_next_step_if(scaler.found_inf());
      opt->step();
      scaler.update();
      if (s == poisoned) {
        for (std::size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(params[i], before[i]));
      }
    }
    CHECK(scaler.skipped_steps() == 1);
    CHECK(scaler.scale_tensor().item<float>() == 512);  // backed off once
    // On the host: the clean steps only, each on gradients divided by its scale.
    std::vector<at::Tensor> reference_params;
    const auto reference = make(reference_params);
    for (std::size_t s = 0; s < grads.size(); ++s) {
      if (s == poisoned) continue;
      const double scale = s < poisoned ? 1024 : 512;
      for (std::size_t i = 0; i < params.size(); ++i)
        reference_params[i].mutable_grad() = grads[s][i] * static_cast<float>(1.0 / scale);
      reference->step();
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(torch::allclose(params[i], reference_params[i], 1e-6, 1e-7));
    }
    // A checkpoint holds the steps taken: 3 (Adam's count; SGD keeps none), and resumes so.
    if (std::string(name) == "adam") {
      const auto bytes = oml::optim::save_optimizer_state(*opt);
      std::vector<at::Tensor> resumed_params;
      const auto resumed = make(resumed_params);
      oml::optim::load_optimizer_state(*resumed, bytes);
      for (const auto* o : {opt.get(), resumed.get()}) {
        const auto& p = o == opt.get() ? params.front() : resumed_params.front();
        CHECK(static_cast<const torch::optim::AdamParamState&>(
                  *o->state().at(oml::torch_compat::optimizer_state_key(p)))
                  .step() == 3);
      }
    }
  }
}

TEST_CASE("The gradient scaler's scale and growth count survive a checkpoint, as PyTorch's state_dict",
          "[precision][optim][io]") {
  oml::optim::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 3;
  oml::optim::GradScaler scaler(options);
  auto w = torch::ones({2}, torch::requires_grad());
  scaler.scale(w.sum()).backward();
  w.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::quiet_NaN()});
  CHECK_FALSE(scaler.unscale({w}));
  scaler.update();  // backoff: 512
  w.mutable_grad() = torch::ones({2});
  CHECK(scaler.unscale({w}));
  scaler.update();  // one clean step of three
  REQUIRE(scaler.current_scale() == 512);

  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  oml::io::ResumeState resume;
  resume.grad_scaler = scaler.state();
  ckpt.resume = resume;
  oml::io::save_checkpoint(dir / "fp16.ckpt", ckpt);
  const auto back = oml::io::load_checkpoint(dir / "fp16.ckpt");
  REQUIRE(back.resume);
  const auto state = back.resume->grad_scaler.toGenericDict();
  CHECK(state.at("scale").toDouble() == 512);
  CHECK(state.at("_growth_tracker").toInt() == 1);
  CHECK(state.at("growth_interval").toInt() == 3);

  oml::optim::GradScaler resumed(options);
  resumed.load_state(back.resume->grad_scaler);
  CHECK(resumed.current_scale() == 512);
  auto v = torch::ones({1}, torch::requires_grad());
  CHECK(resumed.scale(v.sum()).item<double>() == 512);
  for (int i = 0; i < 2; ++i) {  // the third clean step counts from the checkpoint's one
    v.mutable_grad() = torch::ones({1});
    CHECK(resumed.unscale({v}));
    resumed.update();
  }
  CHECK(resumed.current_scale() == 1024);

  // A bf16/fp32 run's checkpoint has no scaler state; a damaged one is a DataError naming the entry.
  oml::io::save_checkpoint(dir / "bf16.ckpt", [] {
    oml::io::Checkpoint c;
    c.resume = oml::io::ResumeState{};
    return c;
  }());
  CHECK(oml::io::load_checkpoint(dir / "bf16.ckpt").resume->grad_scaler.isNone());
  c10::impl::GenericDict damaged(c10::StringType::get(), c10::AnyType::get());
  damaged.insert("scale", std::string("big"));
  damaged.insert("_growth_tracker", int64_t{0});
  CHECK_THROWS_WITH(resumed.load_state(damaged), Contains("'scale' must be a float"));
  REQUIRE(damaged.erase("scale") == 1);
  CHECK_THROWS_WITH(resumed.load_state(damaged), Contains("missing entry 'scale'"));
}

}  // namespace precision_tests
