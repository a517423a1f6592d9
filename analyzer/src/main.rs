fn main() {
    std::process::exit(roceprobe::cli::main_with_args(std::env::args_os()));
}
