"""A notebook the course runner can execute, written in a line: a ``parameters``-tagged cell, then code
cells, on the ``python3`` kernel — for the runner's and the kernel-side tests."""

import nbformat

PARAMETERS = 'SMOKE = False\nSEED = 0\nDEVICE = "cpu"\nMODEL_ID = "pocket"\nOUTPUT_DIR = "."'


def write_notebook(path, *cells: str, parameters: str = PARAMETERS) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(code) for code in cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
