"""`openvino.preprocess` is not available: irrun runs the IR as written.  Every name here raises
NotAvailableError (do the preprocessing in NumPy, or bake it into the IR with OpenVINO)."""
from .exceptions import not_available


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise not_available(f"openvino.preprocess.{name}", "irrun runs the IR as written; preprocess the inputs in "
                        "NumPy, or save the model with OpenVINO after PrePostProcessor.build()")
