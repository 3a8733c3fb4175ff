//! The launcher on its own, for programs that start servers through the host library and do not
//! call `toolwire_sandbox::run_if_launcher` in their own `main`.

fn main() {
    toolwire_sandbox::run_if_launcher();
    eprintln!(
        "usage: toolwire-sandbox {} PROFILE_JSON -- PROGRAM [ARGS…]\n(started by Toolwire's clients, not by hand)",
        toolwire_sandbox::LAUNCHER_FLAG
    );
    std::process::exit(2);
}
