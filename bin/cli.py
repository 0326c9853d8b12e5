"""What every t2t-lite command shares: absl start-up and one-line user errors."""
import re
import sys

from absl import app, flags, logging

from t2t_lite.errors import UserError

flags.DEFINE_string("usr_dir", None, "Your own problems, hparams sets and models: a package directory (with "
                    "__init__.py) or .py file whose registrations are imported before anything is looked up "
                    "(docs/extending.md). A run records it; later commands on the run find it without the flag.")
flags.DEFINE_alias("t2t_usr_dir", "usr_dir")

# Library parameters whose flag has another name: distribution.split_cpu(num_devices) is --cpu_devices.
FLAG_OF_PARAMETER = {"num_devices": "cpu_devices"}


def flag_names(message: str) -> str:
    """`message` as the command line says it: each backquoted parameter that is a defined flag becomes --flag.

    The library names the parameters of its messages in backquotes, as a Python caller passes them
    ("`output_dir` is required"); a command's user sets them with flags ("--output_dir is required").
    Other backquoted words are left as they are.
    """
    def flag(match: re.Match) -> str:
        name = FLAG_OF_PARAMETER.get(match[1], match[1])
        return f"--{name}" if name in flags.FLAGS else match[0]

    return re.sub(r"`([A-Za-z_][A-Za-z0-9_]*)`", flag, message)


def run_main(main, program: str) -> None:
    """Runs `main(argv)` under absl; a UserError becomes one line on stderr and exit code 2.

    Set T2T_LITE_DEBUG=1 to see the traceback of a UserError too. Before anything else, what the libraries
    would write under a read-only $HOME is moved (t2t_lite/environment.py redirect_home_writes).
    """
    import os

    from t2t_lite import environment

    environment.redirect_home_writes()

    def guarded(argv):
        # TensorFlow logs routine INFO lines (checkpoint sharding) through absl; keep the progress lines readable.
        logging.set_verbosity(logging.WARNING)
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; every option is a --flag")
        try:
            if flags.FLAGS.usr_dir:
                from t2t_lite.usr_dir import import_usr_dir

                import_usr_dir(flags.FLAGS.usr_dir)
            return main(argv)
        except UserError as error:
            if os.environ.get("T2T_LITE_DEBUG"):
                raise
            print(f"{program}: error: {flag_names(str(error))}", file=sys.stderr)
            sys.exit(2)

    def parse_flags(argv):
        # absl would print "FATAL Flags parsing error" and a help hint on two lines.
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            print(f"{program}: error: {error} (see --helpshort)", file=sys.stderr)
            sys.exit(2)

    show_flags_of(sys.modules[main.__module__])
    app.run(guarded, flags_parser=parse_flags)


def show_flags_of(module) -> None:
    """Makes --helpshort list `module`'s flags and its docstring head the help.

    absl shows the key flags of the module named by sys.argv[0]; an installed
    console script's argv[0] is the script, not the module that defines its flags.
    """
    for flag in [*flags.FLAGS.get_key_flags_for_module(module), flags.FLAGS["usr_dir"]]:
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    main_module = sys.modules["__main__"]
    if main_module is not module and not main_module.__doc__:
        main_module.__doc__ = module.__doc__
