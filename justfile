# The process-vs-thread lab. `just` alone lists the recipes.

# List the recipes
default:
    @just --list

# Run one experiment, e.g. `just run fork-vs-thread --full`
run NAME *FLAGS:
    cargo lab run {{NAME}} {{FLAGS}}

# Run the test suite (the README's test command)
test:
    cargo test

# Build the book and open it in a browser
book:
    mdbook build book --open

# Re-run every experiment that feeds the book, writing results/ (about 6
# minutes on 2 cores; run it on an otherwise idle machine)
results:
    cargo lab run fork-vs-thread --full --vs-c --rounds 11
    cargo lab run create-destroy
    cargo lab run create-destroy --vs-c --rounds 31 --out results/create-destroy/vs-c
    cargo lab run spawn-methods
    cargo lab run thread-limits
    cargo lab run footprint
    cargo lab run pipe-speed
    cargo lab run pipe-speed --vs-c --rounds 31 --out results/pipe-speed/vs-c
    cargo lab run ctx-switch
    cargo lab run ctx-switch --pins cross --rounds 15 --iterations 100000 --out results/ctx-switch/cross-long
    cargo lab run mq-sweep

# Exactly what CI runs
ci:
    bash .ci/run
