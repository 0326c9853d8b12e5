"""t2t-lite's commands. Importing the package (every command does, before TensorFlow) quiets TensorFlow's start-up."""
from t2t_lite.bin import quiet_start

quiet_start.install()
