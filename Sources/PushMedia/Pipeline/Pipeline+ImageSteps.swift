import Foundation

extension Pipeline {
    /// Reads the image's header, decides (pass through, transcode, reject) and waits until its
    /// decode's memory fits beside the others running.
    func decideImage(_ job: inout JobContext) async throws -> JobResult.Kind? {
        let sniff: SniffResult = job.sniff
        if case let .reject(reason, message) = job.profile.decide(sniff, bytes: job.bytes) {
            throw Failure(reason: reason, message: message)
        }
        job.clock = .now
        let transcoder = job.transcoder
        let temporary = job.temporary
        if sniff.format == .bmp {
            let decodable = temporary + ".tiff"
            job.workFiles.append(decodable)
            try await cpu.run { try transcoder.convertBMP(path: temporary, to: decodable) }
            job.decodable = decodable
        }
        let image = job.decodable
        let header = try await cpu.run { () throws -> ImageHeader in try transcoder.header(path: image) }
        let decision = job.profile.decide(
            sniff, bytes: job.bytes, header: header, longEdge: transcoder.longEdge,
            keepsAnimation: transcoder.keepsAnimation(header))
        if case let .reject(reason, message) = decision { throw Failure(reason: reason, message: message) }
        job.header = header
        job.decision = decision
        if header.unusableProfile {
            job.notes.append(
                "its embedded ICC colour profile is unusable (corrupt, or for another colour space): "
                    + "ignored, the colours are taken as sRGB as browsers do")
        }
        guard let held = await decodeBudget.reserve(transcoder.decodeMemory(header), until: job.deadline) else {
            return .budgetExceeded
        }
        job.heldDecodeMemory = held
        return nil
    }

    /// A passthrough image is decoded once, small: that proves it whole (a truncated file fails
    /// here) and gives its thumbnail. A still image to transcode is decoded once: its thumbnail
    /// now, its attachment from the same pixels in the next step. An animation's thumbnail is its
    /// attachment's first frame, made with it.
    func makeThumbnail(_ job: inout JobContext) async throws -> JobResult.Kind? {
        let transcoder = job.transcoder
        let image = job.decodable
        let header: ImageHeader = job.header
        let wantsThumbnail = transcoder.thumbnailEdge > 0
        if job.decision == .passthrough {
            let small = try await cpu.run { () throws -> EncodedImage in
                try transcoder.thumbnail(path: image, header: header)
            }
            job.count(\.transcode)
            if wantsThumbnail { job.made.thumbnail = small }
            return nil
        }
        job.clock = .now
        guard !transcoder.keepsAnimation(header) else { return nil }
        let decoded = try await cpu.run { () throws -> DecodedImage in
            try transcoder.decode(path: image, header: header)
        }
        job.decoded = decoded
        if wantsThumbnail {
            job.made.thumbnail = try await cpu.run { () throws -> EncodedImage in
                try transcoder.thumbnail(of: decoded)
            }
            job.count(\.transcode)
        }
        return nil
    }

    /// The attachment (a passthrough image is the source itself) and what goes beside it.
    func makeImage(_ job: inout JobContext) async throws -> JobResult.Kind? {
        let transcoder = job.transcoder
        let header: ImageHeader = job.header
        let temporary = job.temporary
        if job.decision == .passthrough {
            let extras = try await cpu.run { () throws -> ImageExtras in
                guard self.needsExtras(frames: header.frames, transcoder: transcoder) else { return ImageExtras() }
                let data = FileManager.default.contents(atPath: temporary).map { [UInt8]($0) } ?? []
                return try self.extras(of: data, frames: header.frames, transcoder: transcoder)
            }
            job.count(\.transcode)
            let upright = header.uprightSize
            job.made.attachment = .file(
                MadeFiles.WorkFile(
                    path: temporary, format: job.sniff.format,
                    width: upright.width, height: upright.height,
                    sha256: job.sourceHash))
            job.status = .passthrough
            job.add(extras)
            return nil
        }
        let encoded: EncodedImage
        if transcoder.keepsAnimation(header) {
            // An animation's attachment decodes every frame; the thumbnail is its first frame.
            let image = job.decodable
            encoded = try await cpu.run { () throws -> EncodedImage in
                try transcoder.attachment(path: image, header: header)
            }
            if let note = encoded.note { job.notes.append(note) }
            if transcoder.thumbnailEdge > 0 {
                job.made.thumbnail = try await cpu.run { () throws -> EncodedImage in
                    try transcoder.thumbnail(encoded: encoded.bytes)
                }
            }
        } else {
            guard let decoded = job.decoded else {
                throw Failure(reason: ReasonCode.internalError, message: "the image was not decoded")
            }
            encoded = try await cpu.run { () throws -> EncodedImage in try transcoder.attachment(of: decoded) }
            job.decoded = nil
        }
        let extras = try await cpu.run { () throws -> ImageExtras in
            try self.extras(of: encoded.bytes, frames: encoded.frames, transcoder: transcoder)
        }
        job.count(\.transcode)
        job.made.attachment = .encoded(encoded)
        job.status = .processed
        job.add(extras)
        return nil
    }

    /// What is made beside an image attachment: the profile's icon, the thumbnail's clipping
    /// rectangle for `--thumb-aspect`, and an animation's representative frame.
    struct ImageExtras: Sendable {
        var icon: EncodedImage?
        var clip: ClipRect?
        var frame: Int?
    }

    private func needsExtras(frames: Int, transcoder: Transcoder) -> Bool {
        transcoder.profile.iconEdge != nil || (config.thumbnailAspect != nil && transcoder.profile.thumbnail)
            || (frames > 1 && transcoder.profile.animation)
    }

    /// Blocking: call on the CPU executor.
    private func extras(of attachment: [UInt8], frames: Int, transcoder: Transcoder) throws -> ImageExtras {
        var extras = ImageExtras()
        extras.icon = try transcoder.icon(encoded: attachment)
        if let aspect = config.thumbnailAspect, transcoder.profile.thumbnail {
            extras.clip = try transcoder.clipRect(encoded: attachment, aspect: aspect)
        }
        if frames > 1 && transcoder.profile.animation {
            // A passed-through animation with a frame that does not decode is still shown by
            // the phone up to that frame; it only goes without the frame hint.
            extras.frame = try? transcoder.representativeFrame(encoded: attachment)
        }
        return extras
    }
}

extension JobContext {
    /// Takes the icon (to store), clipping rectangle and frame made beside the attachment.
    mutating func add(_ extras: Pipeline.ImageExtras) {
        made.icon = extras.icon
        clip = extras.clip
        frame = extras.frame
    }
}
