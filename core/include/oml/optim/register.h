#pragma once
// Registration of the built-in optimizers and schedulers.

namespace oml {
struct Registries;
namespace optim {

/// Adds the optimizers `sgd`, `adam`, `adamw`, `rmsprop`, `adagrad`, `adadelta`, `adamax`,
/// `asgd`, `rprop`, `nadam`, `radam` and the schedulers `step`, `multi_step`, `exponential`,
/// `cosine_annealing`, `one_cycle`, `cyclic`, `linear`, `polynomial`, `reduce_on_plateau`.
void register_builtin_optim(Registries& registries);

}  // namespace optim
}  // namespace oml
