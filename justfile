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

# Re-run every experiment that feeds the book, writing results/
results:
    cargo lab list | cut -d' ' -f1 | while read -r name; do cargo lab run "$name"; done

# Exactly what CI runs
ci:
    bash .ci/run
