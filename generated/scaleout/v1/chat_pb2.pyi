from google.api import annotations_pb2 as _annotations_pb2
from scaleout.v1 import derender_pb2 as _derender_pb2
from scaleout.v1 import render_pb2 as _render_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
