"""irrun: run, check and understand OpenVINO IR models in pure Python."""
from .errors import (InputError, IrrunError, ModelError, ResourceLimitError, ShapeError,
                     UnreadableFileError, UnsupportedError, UsageError)
from .compare import compare
from .extraction import extract
from .reduction import ReduceReport, reduce
from .model import Model, PortInfo, Report, load, load_bytes, validate
from .fix import RepairReport, repair
from .profiling import Profile, profile
from .results import Results

__version__ = "0.1.0"

from . import batch  # noqa: E402  (irrun.batch.run: many samples, local workers or a Dask cluster)

__all__ = ["load", "load_bytes", "validate", "compare", "profile", "Profile", "repair", "extract", "reduce", "ReduceReport",
           "Model", "PortInfo", "Report", "RepairReport", "Results", "IrrunError", "ModelError",
           "InputError", "ShapeError", "UnreadableFileError", "UnsupportedError", "UsageError",
           "ResourceLimitError", "batch", "__version__"]
